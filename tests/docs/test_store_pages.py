"""Every Python block of the stores page and the transcript reference runs
(docs/explanation/stores.md, docs/reference/transcript.md)."""

from __future__ import annotations

import re

import pytest
from paths import ROOT

PAGES = [ROOT / "docs" / "explanation" / "stores.md", ROOT / "docs" / "reference" / "transcript.md"]
BLOCKS = [(page, block) for page in PAGES
          for block in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)]


def test_each_page_has_examples() -> None:
    assert {page for page, _ in BLOCKS} == set(PAGES)


@pytest.mark.parametrize("i", range(len(BLOCKS)), ids=[f"{p.stem}-{i}" for i, (p, _) in
                                                       enumerate(BLOCKS)])
def test_python_block_runs(i: int) -> None:
    page, block = BLOCKS[i]
    exec(compile(block, str(page), "exec"), {"__name__": "store_pages"})


def test_the_transcript_reference_names_every_shape() -> None:
    from fsm.records import transcript

    text = PAGES[1].read_text()
    for cls in transcript._SHAPES:
        assert f"| `{cls.__name__}` | `{cls.KIND}` |" in text, cls.__name__


def test_the_stores_page_names_every_role() -> None:
    from fsm.store import roles

    text = PAGES[0].read_text()
    for name in roles.__all__:
        assert f"| `{name}` |" in text, name

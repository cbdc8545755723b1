"""People's names: when two names are the same person, and which names a reviewer may use;
and when what a person wrote says nothing at all.

Two names are the same person when their confusable skeletons are equal (Unicode
Technical Standard #39, section 4): ``ravi``, ``Ravi``, ``ｒａｖｉ``, ``rаvi`` with a
Cyrillic ``а`` and ``ra\u200bvi`` with a zero-width space all name ravi. The confusables
come from the Unicode data shipped by the ``confusable-homoglyphs`` package, not from a
table kept here; the invisible characters are Unicode's ``Default_Ignorable_Code_Point``.
"""

from __future__ import annotations

import functools
import unicodedata

from confusable_homoglyphs import categories, confusables

#: Marks the package's data puts around right-to-left characters.
_MARKS = "\u200e\u200f"

#: The code points of Unicode's ``Default_Ignorable_Code_Point`` property
#: (``DerivedCoreProperties.txt``): characters no font draws, such as the zero-width
#: space, the joiners, the word joiner, the byte-order mark, the soft hyphen, variation
#: selectors and the Hangul fillers. ``unicodedata`` does not carry the property.
_INVISIBLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


def invisible(ch: str) -> bool:
    """Whether ``ch`` is a default-ignorable code point: nothing is drawn for it."""
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _INVISIBLE_RANGES)


def visible(text: str) -> str:
    """``text`` without its invisible characters (see :func:`invisible`)."""
    return "".join(ch for ch in text if not invisible(ch))


def is_blank(text: str) -> bool:
    """Whether ``text`` shows nothing: only spaces and invisible characters (a note of
    zero-width spaces says nothing, so it is no note)."""
    return not visible(text).strip()


@functools.cache
def _prototypes() -> dict[str, str]:
    """character → the prototype it is confusable with (UTS #39 ``confusables.txt``).

    The package lists each character with its prototype, and each prototype with every
    character confusable with it: each group of confusables is one connected set, and
    its prototype is the member that lists the others.
    """
    data: dict[str, list[dict[str, str]]] = confusables.confusables_data
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for key, entries in data.items():
        for entry in entries:
            a, b = find(key.strip(_MARKS)), find(entry["c"].strip(_MARKS))
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[str, list[str]] = {}
    for member in list(parent):
        groups.setdefault(find(member), []).append(member)
    table: dict[str, str] = {}
    for members in groups.values():
        # The prototype lists every other member; ties (a pair) go to the smaller one.
        proto = max(members, key=lambda m: (len(data.get(m, ())), [-ord(c) for c in m]))
        for m in members:
            if len(m) == 1 and m != proto:
                table[m] = proto
    return table


def skeleton(name: str) -> str:
    """The UTS #39 skeleton of ``name`` after case folding and width folding (NFKC).

    Equal skeletons mean the names look alike, whatever script each letter is from.
    Invisible characters are removed first, as UTS #39 removes default-ignorable code
    points: a name with a zero-width space in it looks exactly like the name without.
    """
    text = visible(unicodedata.normalize("NFKC", visible(name))).strip().casefold()
    table = _prototypes()
    # Mapping, folding case, mapping again: "0" maps to "O", which folds to "o".
    for _ in range(2):
        text = "".join(table.get(ch, ch) for ch in unicodedata.normalize("NFD", text))
        text = unicodedata.normalize("NFD", text).casefold()
    return text


def same_person(a: str, b: str) -> bool:
    """Whether names ``a`` and ``b`` are confusable, so must be taken as one person."""
    return skeleton(a) == skeleton(b)


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a reviewer, or ``None``: empty, or letters of more than
    one script (``rаvi`` with a Cyrillic ``а``), which is how look-alikes are made."""
    if is_blank(name):
        return "a reviewer name must not be empty"
    if confusables.is_mixed_script(unicodedata.normalize("NFKC", visible(name))):
        scripts = sorted(_scripts(name))
        return (f"reviewer name {name!r} mixes letters of {len(scripts)} scripts "
                f"({', '.join(scripts)}); write it in one script")
    return None


def _scripts(name: str) -> set[str]:
    return {categories.alias(ch) for ch in unicodedata.normalize("NFKC", visible(name))} - {
        "COMMON"}


__all__ = ["invisible", "is_blank", "name_problem", "same_person", "skeleton", "visible"]

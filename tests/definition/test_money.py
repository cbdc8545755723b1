"""Money as people type it: one amount in the workflow's currency, in major units."""

from __future__ import annotations

import pytest

from fsm import AmountError, Currency, Presentation
from fsm.definition.money import WHOLE

RUPEES = Currency(symbol="₹", digits=2, minor="paise", major="rupees")
YEN = Currency(symbol="¥", digits=0, minor="yen", major="")
DINARS = Currency(symbol="", digits=3, minor="fils", major="dinars")


@pytest.mark.parametrize(("currency", "typed", "minor"), [
    pytest.param(RUPEES, "1,200", 120_000, id="thousands-comma"),
    pytest.param(RUPEES, "1200", 120_000, id="plain"),
    pytest.param(RUPEES, "1200.50", 120_050, id="two-decimals"),
    pytest.param(RUPEES, "1200.5", 120_050, id="one-decimal"),
    pytest.param(RUPEES, "₹1,200", 120_000, id="with-its-symbol"),
    pytest.param(RUPEES, " ₹ 12,00,000 ", 120_000_000, id="lakh-grouping"),
    pytest.param(RUPEES, "1,20,00,000.50", 1_200_000_050, id="crore-grouping"),
    pytest.param(RUPEES, "1,200,000", 120_000_000, id="million-grouping"),
    pytest.param(RUPEES, "0.05", 5, id="paise-only"),
    pytest.param(YEN, "¥1,500", 1_500, id="no-minor-unit"),
    pytest.param(DINARS, "2.125", 2_125, id="three-digits"),
    pytest.param(WHOLE, "1,200", 1_200, id="no-currency-whole-numbers"),
])
def test_one_amount_is_read_in_major_units(currency: Currency, typed: str,
                                           minor: int) -> None:
    assert currency.parse(typed) == minor


@pytest.mark.parametrize(("currency", "typed", "said"), [
    pytest.param(RUPEES, "1,200.5.3", "must be one amount in ₹ (rupees)", id="two-points"),
    pytest.param(RUPEES, "-5", "no sign, no exponent", id="negative"),
    pytest.param(RUPEES, "+5", "no sign", id="plus"),
    pytest.param(RUPEES, "1e3", "no exponent", id="exponent"),
    pytest.param(RUPEES, "1200.505", "has 3 decimals, but amounts in ₹ (rupees) have at "
                 "most 2", id="too-many-decimals"),
    pytest.param(RUPEES, "$1200", "not in another currency ($)", id="dollar"),
    pytest.param(RUPEES, "1200 €", "not in another currency (€)", id="euro-after"),
    pytest.param(RUPEES, "12,0", "must be one amount", id="bad-grouping"),
    # Groupings that are neither thousands nor lakhs could be a hundred times off: refused.
    pytest.param(RUPEES, "12,00", "commas group thousands, 1,200,000, or lakhs, 12,00,000",
                 id="twelve-hundred-or-twelve"),
    pytest.param(RUPEES, "1,00", "commas group thousands", id="two-digit-last-group"),
    pytest.param(RUPEES, "1,200,00", "commas group thousands", id="mixed-grouping"),
    pytest.param(RUPEES, "123,45,678", "commas group thousands", id="lakhs-of-three"),
    pytest.param(RUPEES, "1,2345", "commas group thousands", id="four-digit-group"),
    pytest.param(RUPEES, "", "must be one amount", id="empty"),
    pytest.param(RUPEES, "1 200", "must be one amount", id="space-inside"),
    pytest.param(RUPEES, "١٢", "must be one amount", id="arabic-digits"),
    pytest.param(RUPEES, "9" * 19, "too large", id="too-large"),
    pytest.param(YEN, "12.5", "must be one amount in ¥, e.g. 1,200 or 1200, no decimals",
                 id="decimals-where-none"),
])
def test_anything_else_is_refused_naming_the_field_and_the_form(
        currency: Currency, typed: str, said: str) -> None:
    with pytest.raises(AmountError) as caught:
        currency.parse(typed, "the form field 'amount'")
    message = str(caught.value)
    assert message.startswith("the form field 'amount' ") and said in message, message
    assert isinstance(caught.value, ValueError)


def test_amounts_read_back_as_they_are_written() -> None:
    assert [RUPEES.format(m) for m in (120_000, 120_050, 5, 0)] == [
        "₹1,200", "₹1,200.50", "₹0.05", "₹0"]
    for minor in (1, 99, 100, 123_456_789, 10**15):
        assert RUPEES.parse(RUPEES.format(minor)) == minor
    assert YEN.format(1_500) == "¥1,500" and DINARS.format(2_125) == "2.125"


def test_a_presentation_without_a_currency_keeps_whole_numbers() -> None:
    plain = Presentation()
    assert plain.parse_money("1,200") == 1_200 and plain.show_money(1_200) == "1200"
    shown = Presentation(currency=RUPEES)
    assert shown.parse_money("1,200") == 120_000 and shown.show_money(120_000) == "₹1,200"
    assert "paise" not in shown.unit.accepted() and "rupees" in shown.unit.accepted()

"""The pure pieces of the command line's error handling (issue 36): numbers in ASCII only, the value an
option was given, --debug anywhere, and validation errors as one line. Hand-worked cases and hypothesis
properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from costmodels.model_spec import ModelSpec
from planner.cli_main import split_debug
from planner.cli_usage import given_value, number_problem
from planner.errors import describe_validation_error


@pytest.mark.parametrize("kind, value, ok", [
    (int, "64", True), (int, "+8", True), (int, "-1", True), (int, "64.0", False), (int, "\u0668", False),
    (int, "\uff12", False), (int, "1e3", False), (int, "9" * 19, False), (int, "", False),
    (float, "2.5", True), (float, "15e12", True), (float, ".5", True), (float, "nan", True), (float, "-inf", True),
    (float, "\uff12", False), (float, "1_000", False), (float, "0x10", False), (float, "", False)])
def test_numbers_are_ascii(kind, value, ok):
    assert (number_problem(kind, value) is None) == ok


@given(st.text(alphabet=st.characters(categories=["Nd"]), min_size=1, max_size=18))
def test_a_whole_number_is_accepted_exactly_when_its_digits_are_ascii(digits):
    assert (number_problem(int, digits) is None) == digits.isascii()


@pytest.mark.parametrize("args, opts, value", [
    (["--nodes", "0"], ["--nodes"], "0"), (["--nodes=0"], ["--nodes"], "0"), (["-j0"], ["--jobs", "-j"], "0"),
    (["-j", "3", "--jobs", "4"], ["--jobs", "-j"], "4"), (["--", "--nodes", "0"], ["--nodes"], None),
    (["--nodes"], ["--nodes"], None), (["--nodes-x", "1"], ["--nodes"], None)])
def test_the_value_an_option_was_given(args, opts, value):
    assert given_value(args, opts) == value


@given(st.lists(st.sampled_from(["estimate", "--debug", "-c", "x", "--", "--nodes", "1"]), max_size=12))
def test_debug_is_taken_out_anywhere_before_a_double_dash(args):
    kept, debug = split_debug(args)
    end = args.index("--") if "--" in args else len(args)
    assert debug == ("--debug" in args[:end])
    assert kept == [a for a in args[:end] if a != "--debug"] + args[end:]


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["num_layers", "hidden_size", "num_attention_heads", "vocab_size",
                                        "ffn_hidden_size", "name", "top_k", "zzz"]),
                       st.one_of(st.integers(-5, 5), st.text(max_size=5), st.none()), max_size=8))
def test_a_validation_error_is_one_line(data):
    try:
        ModelSpec.model_validate(data)
    except ValidationError as err:
        text = describe_validation_error(err, "m.json")
        assert "\n" not in text and text.startswith("m.json")

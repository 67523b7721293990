"""Hostile command-line values, round 2: every floating-point option of `estimate` refuses NaN, infinity and
negative numbers with exit 2 naming the option, through one shared check (pipeline/cli/options.py)."""

from __future__ import annotations

import pytest
from fabricref.cli import estimate
from fabricref.cli.options import _float_options
from fabricref.errors import UsageError

CAPACITY = ["--requests-per-second", "10", "--output-tokens", "100", "--group-tokens-per-second", "1000",
            "--group-size", "8"]  # fmt: skip


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "-0.5"])
def test_estimate_memory_and_capacity_refuse_non_finite_and_negative_numbers(cli, bad):
    memory = cli("estimate", "memory", "--params", bad, "--json")
    assert memory.code == 2 and f"--params {float(bad)}: expected a finite, non-negative number" in memory.err
    assert memory.out == ""
    capacity = cli("estimate", "capacity", *CAPACITY, "--headroom", bad)
    assert capacity.code == 2 and f"--headroom {float(bad)}: expected a finite, non-negative number" in capacity.err
    assert "Traceback" not in capacity.err


def test_good_values_still_work(cli):
    assert cli("estimate", "capacity", *CAPACITY, "--headroom", "0.2").code == 0
    assert cli("estimate", "memory", "--params", "7e9", "--json").code == 0


def _float_params():
    for command in estimate.estimate_app.registered_commands:
        for name, flag in _float_options(command.callback.__wrapped__).items():
            yield pytest.param(command, name, flag, id=f"{command.name}{flag}")


def test_every_estimate_command_is_guarded():
    commands = estimate.estimate_app.registered_commands
    assert commands and all(getattr(c.callback, "_floats_checked", False) for c in commands)
    assert sum(1 for _ in _float_params()) >= 9


@pytest.mark.parametrize("command, name, flag", list(_float_params()))
def test_every_float_option_of_every_estimate_command_refuses_nan(command, name, flag):
    with pytest.raises(UsageError, match=rf"^{flag} nan: expected a finite, non-negative number$"):
        command.callback(**{name: float("nan")})


def _plan_float_params():
    from fabricref.cli import plan

    for command in plan.plan_app.registered_commands:
        for name, flag in _float_options(command.callback.__wrapped__).items():
            yield pytest.param(command, name, flag, id=f"plan-{command.name}{flag}")


@pytest.mark.parametrize("value", [1e-300, 5e-324, 2.2e-308, 9.9e-13])
@pytest.mark.parametrize("command, name, flag", [*_float_params(), *_plan_float_params()])
def test_every_float_option_refuses_a_number_too_close_to_zero(command, name, flag, value):
    """`--mfu 1e-300` gave a step of 1.6e299 seconds; `--group-tokens-per-second 1e-300` overflowed: the rule
    of the declared documents (0, or from 1e-12) holds for every calculator and plan option too."""
    with pytest.raises(UsageError, match=rf"^{flag} {value!r}: too close to 0 .*expected 0 or from 1e-12 to 1e\+18$"):
        command.callback(**{name: value})


def test_magnitudes_that_would_overflow_are_refused_not_printed_as_infinity(cli):
    huge = cli("estimate", "memory", "--params", "1e308", "--json")
    assert huge.code == 2 and "--params 1e+308: expected at most 1e+18" in huge.err and huge.out == ""
    ranks = cli("estimate", "collective", "--op", "all-reduce", "--ranks", "9" * 26, "--bytes", "1GiB",
                "--bandwidth", "400Gb/s", "--latency", "5us")  # fmt: skip
    assert ranks.code == 2 and "--ranks 999" in ranks.err and "magnitude at most 2**53" in ranks.err
    overflow = cli("estimate", "capacity", "--requests-per-second", "1e17", "--output-tokens", "1e17",
                   "--group-tokens-per-second", "1e-300", "--group-size", "8", "--json")  # fmt: skip
    assert overflow.code == 2 and "--group-tokens-per-second 1e-300: too close to 0" in overflow.err
    assert "Traceback" not in overflow.err and overflow.out == ""


def test_json_output_never_holds_nan_or_infinity(capsys):
    from fabricref.cli.output import print_json
    from fabricref.errors import FabricrefError

    with pytest.raises(FabricrefError, match="NaN or infinite"):
        print_json({"bytes": float("inf")})
    assert capsys.readouterr().out == ""

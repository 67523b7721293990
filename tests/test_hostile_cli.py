"""Hostile command-line values, round 2: every floating-point option of `estimate` refuses NaN, infinity and
negative numbers with exit 2 naming the option, through one shared check (pipeline/cli/options.py)."""

from __future__ import annotations

import pytest

from pipeline.cli import estimate
from pipeline.cli.options import _float_options
from pipeline.core.errors import UsageError

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

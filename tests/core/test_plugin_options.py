"""Every plugin's options class agrees with its config schema (the defaults are written twice)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import attrs
import pytest

from aka_core.plugin.host import PluginHost
from aka_core.plugin.records import ScorerSpec
from aka_core.testing.options import option_default_mismatches

REPO = Path(__file__).resolve().parents[2]


def _distribution(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_plugin_options_class_matches_its_schema_defaults() -> None:
    host = PluginHost()
    assert not host.load_errors, [error.error for error in host.load_errors]
    ours = {_distribution(tomllib.loads(p.read_text())["project"]["name"])
            for p in REPO.glob("plugins/aka-*/pyproject.toml")}
    loaded = {_distribution(plugin["distribution"]) for plugin in host.describe()["plugins"]}
    assert ours <= loaded, f"plugin distributions not installed: {sorted(ours - loaded)}"
    problems = [problem for reg in host.registered()
                for problem in option_default_mismatches(reg.record)]
    assert not problems, "\n".join(problems)


@attrs.frozen(kw_only=True)
class _Options:
    k: float = 2.0
    label: str | None = None
    extra: tuple[str, ...] = ()


def _record(properties: dict, **kw) -> ScorerSpec:
    return ScorerSpec(name="demo", factory=lambda options: options, options_class=_Options,
                      config_schema={"type": "object", "properties": properties, **kw})


AGREEING = {"k": {"default": 2}, "label": {"type": "string"}, "extra": {"default": []}}


def test_agreeing_options_and_schema_have_no_problems() -> None:
    assert option_default_mismatches(_record(AGREEING)) == []


@pytest.mark.parametrize(("properties", "named"), [
    ({**AGREEING, "k": {"default": 1.05}}, "option 'k' defaults to 1.05"),
    ({**AGREEING, "k": {}}, "option 'k' defaults to None"),
    ({**AGREEING, "label": {"default": "x"}}, "option 'label' defaults to 'x'"),
    ({**AGREEING, "extra": {"default": ["a"]}}, "option 'extra' defaults to ['a']"),
    ({**AGREEING, "other": {}}, "option 'other' is in config_schema but not a field"),
    ({"k": {"default": 2}, "label": {}}, "field 'extra' of _Options is not an option"),
])
def test_a_disagreement_names_the_plugin_and_the_option(properties: dict, named: str) -> None:
    problems = option_default_mismatches(_record(properties))
    assert len(problems) == 1 and problems[0].startswith("scorer 'demo': ")
    assert named in problems[0]


def test_options_in_the_schema_need_an_options_class() -> None:
    record = ScorerSpec(name="demo", factory=dict, config_schema={"properties": {"k": {}}})
    assert option_default_mismatches(record) == [
        "scorer 'demo': config_schema has options ['k'] but the record has no options_class"]
    assert option_default_mismatches(attrs.evolve(record, config_schema={"properties": {}})) == []


def test_make_types_the_options_and_fills_the_defaults() -> None:
    made = _record(AGREEING).make({"k": 3, "extra": ["a"]})
    assert made == _Options(k=3.0, extra=("a",))
    assert _record(AGREEING).make(None) == _Options()

"""DeepSpeed's optimizer.type as the states it keeps (planner.frameworks.deepspeed.config_json.ds_optimizer), for
every name deepspeed 0.19.8 accepts (runtime/config.py DEEPSPEED_OPTIMIZERS): BERT's LAMB configs in
DeepSpeedExamples (bing_bert) were refused as "not Adam-family", though FusedLamb keeps Adam's two moments."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from planner.errors import UserError
from planner.frameworks.deepspeed.config_json import ds_optimizer

ACCEPTED = {"adagrad": "sgd", "adam": "adam", "adamw": "adam", "lamb": "adam", "muadam": "adam",
            "muadamw": "adam", "musgd": "sgd", "lion": "sgd", "muon": "sgd", "OneBitLamb": "adam"}


@pytest.mark.parametrize("name,states", sorted(ACCEPTED.items()))
def test_every_deepspeed_optimizer_is_priced_by_its_moments(name, states):
    assert ds_optimizer({"optimizer": {"type": name, "params": {"lr": 1e-3}}}, Path("ds.json")) == states


def test_the_installed_deepspeeds_names_are_all_covered():
    """Read from deepspeed's runtime/config.py source (importing deepspeed takes seconds): every *_OPTIMIZER name
    it lists is priced (installed in the dev venv and on CI)."""
    spec = importlib.util.find_spec("deepspeed")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("deepspeed is not installed")
    text = (Path(spec.submodule_search_locations[0]) / "runtime" / "config.py").read_text()
    names = set(re.findall(r"^[A-Z_]+_OPTIMIZER = '(\w+)'", text, re.M))
    assert names and names <= {n.lower() for n in ACCEPTED}


def test_an_unknown_optimizer_is_refused_naming_it():
    with pytest.raises(UserError, match="optimizer.type='shampoo'"):
        ds_optimizer({"optimizer": {"type": "Shampoo"}}, Path("ds.json"))

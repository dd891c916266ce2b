"""`collective.library` names the vendor's library the GPUs run: nccl on NVIDIA GPUs, rccl on AMD's. The
collectives are modelled the same way under either name (NCCL's algorithms and tuner; RCCL is NCCL's port, its
rings following an xGMI mesh's cycles), so a library the GPUs cannot run is refused, not run as the other."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario


def scenario(library: str | None, gpu: str = "H100", datacenter: str | None = None):
    data = gpt_scenario().as_data()
    if datacenter is not None:
        data["datacenter"] = {"from": datacenter, "cluster": {"num_nodes": 1}}
    else:
        data["datacenter"]["node"]["gpu"] = gpu
    if library is not None:
        data["collective"] = {"library": library}
    return parse_scenario(data, "s.yaml")


@pytest.mark.parametrize(("library", "datacenter", "refusal"), [
    ("rccl", "dgx-h100", "rccl is AMD's library, and the datacenter's GPUs (H100-SXM5-80GB) are NVIDIA's, which run "
                         "nccl"),
    ("nccl", "mi300x-platform", "nccl is NVIDIA's library, and the datacenter's GPUs (MI300X) are AMD's, which run "
                                "rccl"),
])
def test_a_library_the_gpus_cannot_run_is_refused(library, datacenter, refusal):
    """Both were accepted and ran the same collectives: nothing read the field."""
    with pytest.raises(ConfigError) as refused:
        scenario(library, datacenter=datacenter)
    assert str(refused.value) == f"s.yaml: collective.library: {refusal}; leave it out for theirs"


@pytest.mark.parametrize(("library", "datacenter"), [
    (None, "dgx-h100"), ("nccl", "dgx-h100"), (None, "mi300x-platform"), ("rccl", "mi300x-platform")])
def test_the_vendors_own_library_or_none_named_is_accepted(library, datacenter):
    assert scenario(library, datacenter=datacenter).collective.library == library

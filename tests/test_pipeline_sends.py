"""Pipeline sends in the training model: non-interleaved 1F1B waits on each stage's sends
(Megatron overlaps only the interleaved schedule's, with overlap_p2p_comm, on by default
since 2024: ``--no-overlap-p2p-communication`` turns it off), DualPipe hides them in its
paired chunks, and Megatron-LM's scatter/gather (SC21 section 4.1) sends 1/TP of the
activations as sequence parallelism does."""

from __future__ import annotations

import json

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.estimate import TrainingConfig, estimate_training
from gpuarch.workloads import preset

CATALOG = load_catalog()
LLAMA_70B = preset("llama-3.1-70b").shape


def _p2p(**kw):  # type: ignore[no-untyped-def]
    base = {"gpus": 64, "seq_len": 4096, "global_batch": 128, "tp": 8, "pp": 8}
    cfg = TrainingConfig(**{**base, **kw})
    doc = estimate_training(CATALOG, LLAMA_70B, CATALOG.product("h100"), cfg,
                            system=CATALOG.system("dgx h100")).as_json()
    return doc["communication_breakdown_s"]["pipeline_p2p"], doc


def test_1f1b_waits_on_its_sends_and_interleaving_overlaps_them() -> None:
    plain, doc = _p2p()
    assert plain > 0
    assert doc["parallelism"]["pp_comm_overlap"] is None  # nothing to overlap at VPP 1
    overlapped, doc = _p2p(vpp=2)
    assert overlapped == 0.0 and doc["parallelism"]["pp_comm_overlap"] is True
    # without the overlap each of the two chunks sends once a micro-batch each way: twice
    # the plain schedule's sends of the same activations
    waiting, doc = _p2p(vpp=2, pp_comm_overlap=False)
    assert waiting == pytest.approx(2 * plain, rel=1e-9)
    assert doc["parallelism"]["pp_comm_overlap"] is False
    # the waits lengthen the step by what they charge, bubble included
    assert _p2p(vpp=2, pp_comm_overlap=False)[1]["step_time_s"] > \
        _p2p(vpp=2)[1]["step_time_s"]


def test_dualpipe_hides_its_sends() -> None:
    assert _p2p(pp_schedule="dualpipe")[0] == 0.0
    assert _p2p(pp_schedule="zb1p")[0] == pytest.approx(_p2p()[0], rel=1e-9)


def test_scatter_gather_sends_what_sequence_parallelism_sends() -> None:
    """Both send 1/TP of a stage's activations from each tensor-parallel rank."""
    full, _ = _p2p()
    split, doc = _p2p(pp_scatter_gather=True)
    sp, _ = _p2p(sequence_parallel=True)
    assert split < full and split == pytest.approx(sp, rel=1e-9)
    assert doc["parallelism"]["pp_scatter_gather"] is True


def test_cli_flag_and_launch(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "train", "--model", "llama-3.1-70b", "--gpu", "h100", "--gpus", "64",
            "--tp", "8", "--pp", "4", "--vpp", "2", "--seq-len", "4096",
            "--global-batch", "128"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["communication_breakdown_s"][
        "pipeline_p2p"] == 0.0
    assert main([*argv, "--no-pp-comm-overlap", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["communication_breakdown_s"][
        "pipeline_p2p"] > 0.0
    assert main([*argv, "--no-pp-comm-overlap", "--launch", "megatron"]) == 0
    assert "--no-overlap-p2p-communication" in capsys.readouterr().out

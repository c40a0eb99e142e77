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
    assert doc["assumptions"]["pipeline_sends"].startswith("overlapped")
    # without the overlap each of the two chunks sends once a micro-batch each way: twice
    # the plain schedule's sends of the same activations
    waiting, doc = _p2p(vpp=2, pp_comm_overlap=False)
    assert waiting == pytest.approx(2 * plain, rel=1e-9)
    assert doc["parallelism"]["pp_comm_overlap"] is False
    # the waits lengthen the step by what they charge, bubble included
    assert _p2p(vpp=2, pp_comm_overlap=False)[1]["step_time_s"] > \
        _p2p(vpp=2)[1]["step_time_s"]


def test_dualpipe_hides_its_sends() -> None:
    hidden, doc = _p2p(pp_schedule="dualpipe")
    assert hidden == 0.0 and doc["assumptions"]["pipeline_sends"].startswith("hidden")
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


def test_a_pipeline_across_nodes_runs_at_its_network_sends_pace() -> None:
    """Stages wait on their sends, so one boundary over the network paces every rank: a
    pipeline over two DGX H100s pays the network's send per micro-batch, whether one
    boundary crosses (PP 16) or every other one does (PP 8 x DP 2, stages two ranks apart),
    where the same pipeline inside one node sends over NVLink."""
    shape = preset("llama-3.1-8b").shape

    def per_micro_batch(gpus: int, pp: int) -> float:
        cfg = TrainingConfig(gpus=gpus, seq_len=4096, global_batch=64, tp=1, pp=pp)
        doc = estimate_training(CATALOG, shape, CATALOG.product("h100"), cfg,
                                system=CATALOG.system("dgx h100")).as_json()
        micro_batches = cfg.global_batch // (gpus // pp)
        assert ("over the network" in doc["assumptions"]["pipeline_sends"]) == (gpus > 8)
        return doc["communication_breakdown_s"]["pipeline_p2p"] / micro_batches

    one_node = per_micro_batch(8, 8)
    across_one_boundary = per_micro_batch(16, 16)
    across_every_other = per_micro_batch(16, 8)
    assert across_one_boundary == pytest.approx(across_every_other, rel=1e-9)
    # DGX H100: 450 GB/s of NVLink each way against one 400 Gb/s NIC per GPU
    assert across_one_boundary > 3 * one_node > 0


def test_a_tied_embedding_is_reduced_between_first_and_last_stage() -> None:
    """A word embedding tied to the output layer lives on the first and the last stage;
    Megatron-Core all-reduces its gradient between them when the backward is done
    (finalize_model_grads), which nothing overlaps: one vocab/TP x hidden gradient each
    step, exposed, and nothing without a pipeline, untied, under LoRA (frozen) or under
    DualPipeV (both ends on one GPU)."""
    tied = preset("llama-3.2-3b").shape
    assert tied.tied_embeddings

    def part(shape, **kw):  # type: ignore[no-untyped-def]
        base = {"gpus": 16, "seq_len": 4096, "global_batch": 64, "tp": 2, "pp": 4}
        cfg = TrainingConfig(**{**base, **kw})
        doc = estimate_training(CATALOG, shape, CATALOG.product("h100"), cfg,
                                system=CATALOG.system("dgx h100")).as_json()
        return doc["communication_breakdown_s"]["tied_embedding"], doc

    seconds, doc = part(tied)
    assert seconds > 0
    assert sum(doc["communication_breakdown_s"].values()) == pytest.approx(
        doc["time_breakdown_s"]["exposed_communication"], rel=1e-9)
    # the gradient is FP32 by default, BF16 with bf16_grads: about half the transfer
    assert part(tied, bf16_grads=True)[0] < 0.6 * seconds
    # twice the tensor-parallel ranks, half of the vocabulary each
    assert part(tied, tp=4, pp=2)[0] < seconds
    assert part(tied, pp=1, tp=8)[0] == 0.0
    assert part(LLAMA_70B, tp=4)[0] == 0.0  # untied
    assert part(tied, lora_rank=16)[0] == 0.0
    assert part(tied, pp_schedule="dualpipev", vpp=2)[0] == 0.0

"""The HTML report: self-contained, well-formed, shows each section, written whole or not."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.validation.inference import validate_inference
from gpuarch.validation.training import validate_training


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.external: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href") and value and not value.startswith("#"):
                self.external.append(f"{tag} {name}={value}")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("report") / "r.html"
    status = main(["report", "--out", str(out), "--model", "llama-3.1-8b", "--tokens", "100B",
                   "--max-gpus", "64"])
    assert status == 0
    return out.read_text(encoding="utf-8")


def test_report_is_self_contained_and_has_every_section(report: str) -> None:
    """No scripts and nothing fetched: every src/href is a fragment; six inline charts
    (training front, serving front, roofline, evolution, and the training and serving
    models' errors on the published measurements); the tables name GPUs and the
    architectures of the feature matrix."""
    page = _Collect()
    page.feed(report)
    assert page.external == [] and "script" not in page.tags
    assert page.tags.count("svg") == 6 and "table" in page.tags
    text = " ".join(page.text)
    for heading in ("Training llama-3.1-8b", "Serving llama-3.1-8b", "roofline",
                    "How the architectures grew", "Which architecture brought what",
                    "Best plan on each GPU", "Best deployment on each GPU", "Assumptions"):
        assert heading in text, heading
    # the serving reasons name what bounds decode on the hardware (the default ~8B search's
    # best deployments run large batches, where the executor's host time sets the step)
    assert "Hopper" in text and "Tensor Cores" in text
    assert "bandwidth-bound" in text or "host-bound" in text
    # each answer's error bands, for the architectures it compared
    assert "Error bands (gpuarch validate bands)" in text
    assert "training, Hopper: the model's error on" in text
    assert "published figures of dense serving on Blackwell" in text
    # and the measured runs nearest each answer's best plan
    assert "training, a measured run near the best plan:" in text
    # the models' accuracy on every shipped measurement, as validate prints it
    assert "Accuracy against published measurements" in text
    catalog = load_catalog()
    for task, what, summary in (
            ("Training (gpuarch validate training)", "training points",
             validate_training(catalog)),
            ("Serving (gpuarch validate inference)", "serving figures",
             validate_inference(catalog))):
        assert f"{task}: {len(summary.rows):,} published {what}, mean |error| " \
               f"{summary.mean_abs_error:.1%}" in text
        assert f"{summary.beyond} beyond ±{summary.bound:.0%}" in text
    # how far the energy model is from measured power, under the energy assumptions
    assert "Against measured power (gpuarch validate power): 328 serving configurations'" \
        in text and "3 metered training runs' node power" in text
    # the parts: operators timed on a real GPU beside the model's times
    assert "checked on a real GPU (gpuarch validate ops)" in text
    assert "NVIDIA H200" in text and "grouped_gemm" in text
    # each pick's command: Megatron-LM for training, TensorRT-LLM's server for serving
    assert "Run it: Megatron-LM" in text and "pretrain_gpt.py" in text
    assert "Run it: TensorRT-LLM" in text and "trtllm-serve meta-llama/Llama-3.1-8B" in text


def test_report_bad_path_writes_nothing(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A wrong suffix or a missing folder: exit 2, the flag named, no file."""
    for target, message in ((tmp_path / "r.pdf", "must end in .html or .htm"),
                            (tmp_path / "nope" / "r.html", "does not exist")):
        status = main(["report", "--out", str(target), "--max-gpus", "8"])
        err = capsys.readouterr().err
        assert status == 2 and "--out" in err and message in err
        assert not target.exists()
    assert list(tmp_path.iterdir()) == []

"""How the validators read a row's number format: a training or memory row's precision as
config/number_formats.py reads one (every training format by its name and as tables write it, bf16 where the cell
names none, a format simulon does not train in refused), and a row in a format its GPU has no tensor-core rate for
skipped with the reason, in the kernels validator as in the other two, never ending the run."""

from __future__ import annotations

import csv

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from simulon.config.common import DTYPE_SPELLINGS, DType, dtype_named
from simulon.config.number_formats import NUMBER_FORMATS, training_precision
from simulon.validate import memory, training
from simulon.validate.kernels import validate_kernels
from simulon.validate.memory import validate_memory
from simulon.validate.report import shipped_table

TRAINED = [d for d in NUMBER_FORMATS if d != DType.fp4]  # a bare "fp4" is NVFP4 (precision_named)
SEPARATORS = st.sampled_from(["", " ", "_", "-"])
GEMM_ROW = {"hardware": "H100-SXM5-80GB", "kernel": "GEMM", "dtype": "bf16", "M": "8192", "N": "8192", "K": "8192",
            "batch": "", "kernel_tflops": "600"}
MEMORY_ROW = {"source": "our cluster", "locator": "", "model": "Llama3-8B", "hardware": "8x B200",
              "framework": "Megatron-LM", "num_gpus": "8", "tp": "2", "pp": "1", "dp": "4", "cp": "1", "ep": "1",
              "vpp": "1", "sp": "", "recompute": "none", "zero_or_fsdp": "", "mbs": "1", "gbs": "32",
              "seq_len": "4096", "dtype": "bf16", "mem_gib": "40", "mem_kind": "allocated", "notes": ""}


def flip_case(text: str, flips: list[bool]) -> str:
    return "".join(c.upper() if flip else c for c, flip in zip(text, flips + [False] * len(text), strict=False))


def training_row(precision: str, hardware: str = "8x H100 (DGX H100)") -> dict[str, str]:
    with open(shipped_table("training"), newline="") as handle:
        columns = next(csv.reader(handle))
    return {**dict.fromkeys(columns, ""), "subset": "mine", "hardware": hardware, "num_gpus": "8",
            "model": "meta-llama/Llama-3.1-8B", "layers": "2", "seq_len": "2048", "precision": precision,
            "framework": "Megatron-LM", "tp": "1", "gbs": "8", "mbs": "1", "iter_time_s": "0.5"}


# 1. the reading: config.number_formats.training_precision


@given(st.sampled_from(TRAINED), st.lists(st.booleans(), max_size=8),
       st.sampled_from(["{}", "{}{sep}mixed", "amp{sep}{}", "{}/DEFAULT", "torch.{}"]), SEPARATORS)
def test_every_training_format_written_in_any_case_and_decoration_reads_as_itself(dtype, flips, form, separator):
    assert training_precision(form.format(flip_case(dtype.value, flips), sep=separator))[0] is dtype


@given(st.sampled_from(sorted(DTYPE_SPELLINGS)), st.lists(st.booleans(), max_size=12))
def test_a_dtype_spelled_as_users_spell_it_reads_as_that_dtype(spelling, flips):
    expected = DTYPE_SPELLINGS[spelling]
    assert training_precision(flip_case(spelling, flips))[0] is (DType.nvfp4 if expected is DType.fp4 else expected)


@pytest.mark.parametrize("written, dtype, recipe", [
    ("fp8 current-scaling", DType.fp8, "current"), ("fp16 AMP", DType.fp16, None), ("bf16?", DType.bf16, None),
    ("unknown", DType.bf16, None), ("", DType.bf16, None), ("BF16/FP16", DType.bf16, None),
    ("bf16 with fp32 master weights", DType.bf16, None), ("FP32", DType.fp32, None), ("float32", DType.fp32, None),
    ("TF32", DType.tf32, None), ("half", DType.fp16, None), ("checkpointing 8 layers", DType.bf16, None),
    ("not stated (TFLOPS/MFU ratio implies 989 TFLOPS BF16 peak)", DType.bf16, None),
])
def test_a_precision_cell_as_the_tables_write_it_reads_as_its_format(written, dtype, recipe):
    assert training_precision(written) == (dtype, recipe)


@given(st.sampled_from(["int", "uint", "INT", "fp", "float", "FP"]), st.sampled_from([4, 6, 8, 64]), SEPARATORS,
       st.sampled_from(["{}", "amp_{}", "{} quantized", "torch.{}"]))
def test_a_format_simulon_does_not_train_in_is_refused_naming_it(kind, bits, separator, form):
    assume(kind.lower() in ("int", "uint") or bits not in (4, 8))  # fp4 and fp8 are formats simulon trains in
    with pytest.raises(ValueError, match="is not a format simulon trains in"):
        training_precision(form.format(f"{kind}{separator}{bits}"))


# 2. kernels: a format the GPU lacks skips the row


def test_a_kernel_row_in_a_format_its_gpu_has_no_peak_for_is_skipped_and_the_rest_compared():
    report = validate_kernels([{**GEMM_ROW, "hardware": "A100-SXM4-80GB", "dtype": "fp8", "kernel_tflops": "271"},
                               {**GEMM_ROW, "dtype": "nvfp4", "kernel_tflops": "794"}, GEMM_ROW])
    assert [r.index for r in report.rows] == [2]
    assert [(s.index, s.reason) for s in report.skipped] == [
        (0, "dtype: GPU A100-SXM4-80GB has no fp8 peak (it lists fp32, tf32, bf16, fp16)"),
        (1, "dtype: GPU H100-SXM5-80GB has no nvfp4 peak (it lists fp32, tf32, bf16, fp16, fp8)")]


# 3. memory: the dtype cell read as a precision


@pytest.mark.parametrize("written, dtype, recipe", [
    ("nvfp4", DType.nvfp4, None), ("mxfp8", DType.mxfp8, None), ("fp32", DType.fp32, None),
    ("fp8 current-scaling", DType.fp8, "current"), ("bf16?", DType.bf16, None), ("fp16 AMP", DType.fp16, None),
])
def test_a_memory_rows_dtype_is_the_format_it_names(written, dtype, recipe):
    train = memory.scenario_from_row({**MEMORY_ROW, "dtype": written}).workload.training
    assert (train.dtype, train.fp8_recipe) == (dtype, recipe)


def test_a_memory_row_in_nvfp4_predicts_another_peak_than_in_bf16():
    report = validate_memory([MEMORY_ROW, {**MEMORY_ROW, "dtype": "nvfp4"}])
    bf16, nvfp4 = (r.predicted for r in report.rows)
    assert nvfp4 != bf16


@pytest.mark.parametrize("changes, reason", [
    ({"dtype": "int8"}, "int8 is not a format simulon trains in"),
    ({"dtype": "nvfp4", "hardware": "8x H100 80GB SXM"}, "GPU H100-SXM5-80GB has no nvfp4 peak"),
    ({"dtype": "fp8", "hardware": "A100 80GB"}, "GPU A100-SXM4-80GB has no fp8 peak"),
])
def test_a_memory_row_in_a_format_simulon_or_its_gpu_cannot_train_in_is_skipped_saying_so(changes, reason):
    report = validate_memory([{**MEMORY_ROW, **changes}, MEMORY_ROW])
    assert [r.index for r in report.rows] == [1]
    assert [s.index for s in report.skipped] == [0] and reason in report.skipped[0].reason


# 4. training: the precision cell read as its format


@pytest.mark.parametrize("written, dtype", [("FP32", DType.fp32), ("float32", DType.fp32), ("TF32", DType.tf32),
                                            ("BF16", DType.bf16)])
def test_a_training_row_in_fp32_or_tf32_is_simulated_in_it_not_in_bf16(written, dtype):
    assert training.scenario_from_row(training_row(written)).workload.training.dtype is dtype


def test_a_training_row_in_int8_is_skipped_saying_simulon_does_not_train_in_it():
    with pytest.raises(training.Unsupported, match="int8 is not a format simulon trains in"):
        training.scenario_from_row(training_row("INT8"))


@pytest.mark.parametrize("written", ["FP8 blockwise", "fp8 (DeepSeek 1x128 blocks)", "Float8BlockScaling",
                                     "FP8 block-scaling"])
def test_fp8_with_per_block_scales_is_refused_in_both_validators_not_read_as_delayed_scaling(written):
    """A precision naming fp8 with block scales was simulated as per-tensor fp8 under delayed scaling."""
    with pytest.raises(training.Unsupported, match=r"fp8 with per-block scales .* is not modelled"):
        training.scenario_from_row(training_row(written))
    report = validate_memory([{**MEMORY_ROW, "dtype": written, "hardware": "8x H100 80GB SXM"}, MEMORY_ROW])
    assert [s.index for s in report.skipped] == [0] and "per-block scales" in report.skipped[0].reason


@pytest.mark.parametrize(("cell", "dtype"), [("FP8 (E4M3)", "fp8"), ("BF16 (bfloat16)", "bf16"),
                                             ("fp16 (half)", "fp16")])
def test_a_kernel_rows_dtype_with_a_gloss_naming_the_same_type_is_compared(cell, dtype):
    """'FP8 (E4M3)', as tables write a format with its encoding, was 'not modelled' and the row skipped."""
    glossed = validate_kernels([{**GEMM_ROW, "dtype": cell}])
    plain = validate_kernels([{**GEMM_ROW, "dtype": dtype}])
    assert not glossed.skipped and [(r.measured, r.predicted, r.group) for r in glossed.rows] == [
        (r.measured, r.predicted, r.group) for r in plain.rows]


ELEMENTS = {DType.mxfp8: DType.fp8, DType.mxfp4: DType.fp4, DType.nvfp4: DType.fp4}
"""OCP Microscaling v1.0: MXFP8 blocks of E4M3 or E5M2 elements, MXFP4 of E2M1; NVIDIA's NVFP4 of E2M1."""
ELEMENT_GLOSSES = {DType.mxfp8: ["E4M3", "E5M2", "FP8", "float8_e4m3fn"], DType.mxfp4: ["E2M1", "FP4"],
                   DType.nvfp4: ["E2M1", "fp4_e2m1", "FP4"]}


@given(st.sampled_from(list(ELEMENT_GLOSSES)), st.data())
def test_a_block_scaled_format_glossed_with_its_element_type_is_that_format(fmt, data):
    """'MXFP8 (E4M3)' was refused while 'FP8 (E4M3)' was read: MXFP8's elements are E4M3 (or E5M2), MXFP4's and
    NVFP4's E2M1, so the gloss names the format's element and the cell is the format."""
    gloss = data.draw(st.sampled_from(ELEMENT_GLOSSES[fmt]))
    assert dtype_named(f"{fmt.value.upper()} ({gloss})") is fmt
    assert dtype_named(f"{fmt.value} ({gloss.lower()})") is fmt


@given(st.sampled_from(list(ELEMENTS)), st.sampled_from(list(DType)))
def test_a_block_scaled_format_glossed_with_another_type_is_still_refused(fmt, other):
    assume(other not in (fmt, ELEMENTS[fmt]))
    cell = f"{fmt.value.upper()} ({other.value.upper()})"
    assert dtype_named(cell) == cell  # left for validation to refuse
    assert dtype_named(f"{ELEMENTS[fmt].value} ({fmt.value})") != ELEMENTS[fmt]  # the element glossed as the format


@pytest.mark.parametrize("cell", ["fp8 (hybrid)", "bf16 (fp16)", "(bf16)"])
def test_a_gloss_naming_another_type_or_none_is_still_refused(cell):
    (skipped,) = validate_kernels([{**GEMM_ROW, "dtype": cell}]).skipped
    assert "is not modelled" in skipped.reason

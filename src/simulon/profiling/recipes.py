"""torch stand-ins for the tracer's kernels: each planned kernel becomes a zero-argument call that runs
it once on tensors of the kernel's shape. Imported only when profiling (torch is an optional extra).

GEMMs run as torch.matmul / torch.bmm (fp8 through torch._scaled_mm), attention as scaled_dot_product_attention
on the backend of the workload's library (flash: FlashAttention-2, cudnn, xformers: the efficient one, pytorch: the
math one), and memory-bound kernels as the operation they stand for: layer/RMS norm, residual add, GELU or SwiGLU
(one fused kernel each way, compiled as Megatron-Core's jit_fuser compiles it), MoE permutation gathers, embedding
lookup and its gradient, vocab cross-entropy, the gradient buffers' zeroing, NaN check and scaling, and Megatron's
optimizer step (gradient norm, Adam, master-weight cast). A memory-bound kernel the recipes do not know is timed as
a copy of its bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import torch
import torch.nn.functional as F

from ..config.common import DType
from ..workload.data_parallel import CHECK_PASSES, CHECK_SCALE_PASSES, optimizer_kernel
from ..workload.kernels import KernelClass, KernelSpec, Phase, attention_impl
from ..workload.layer_kernels import LayerKernels
from .plan import SweepPoint

TORCH_DTYPES = {DType.bf16: torch.bfloat16, DType.fp16: torch.float16, DType.fp32: torch.float32,
                DType.tf32: torch.float32}


SDPA_FUSED_HEAD_DIM = 256
"""The widest head PyTorch's fused attention backends take (FlashAttention-2's limit, cuDNN's on Hopper)."""


class Unsupported(Exception):
    """This kernel cannot be timed on this device (say, fp8 on a CPU)."""


def build(spec: KernelSpec, point: SweepPoint, kernels: LayerKernels, device: str) -> Callable[[], object]:
    if spec.kclass in (KernelClass.gemm, KernelClass.grouped_gemm):  # a GEMM the recipe keeps 16-bit says so
        return _gemm(spec, DType(dict(spec.shape).get("precision", point.dtype.value)), device)
    act = TORCH_DTYPES.get(point.dtype, torch.bfloat16)  # fp8 training keeps 16-bit activations
    if spec.kclass == KernelClass.attention:
        return _attention(spec, act if act != torch.float32 else torch.bfloat16, device)
    return _memory(spec, point, kernels, act, device)


def _randn(*shape: int, dtype: torch.dtype, device: str, grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype, device=device, requires_grad=grad)


def _gemm(spec: KernelSpec, dtype: DType, device: str) -> Callable[[], object]:
    s = dict(spec.shape)
    groups, n, k = int(s["groups"]), int(s["n"]), int(s["k"])
    rows = int(s["m"]) // groups
    if dtype == DType.fp8:
        if device != "cuda" or not hasattr(torch, "_scaled_mm"):
            raise Unsupported("fp8 GEMMs need a CUDA GPU with FP8 tensor cores")
        a = _randn(rows, k, dtype=torch.bfloat16, device=device).to(torch.float8_e4m3fn)
        b = _randn(n, k, dtype=torch.bfloat16, device=device).to(torch.float8_e4m3fn).t()  # column-major
        one = torch.ones((), device=device)
        return lambda: [torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                        for _ in range(groups)]
    if dtype not in TORCH_DTYPES:
        raise Unsupported(f"{dtype.value} GEMMs have no torch stand-in")
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = dtype == DType.tf32
    a = _randn(groups, rows, k, dtype=TORCH_DTYPES[dtype], device=device)
    b = _randn(groups, k, n, dtype=TORCH_DTYPES[dtype], device=device)
    if groups == 1:
        a2, b2 = a[0], b[0]
        return lambda: torch.matmul(a2, b2)
    return lambda: torch.bmm(a, b)


def _sdpa_backend(library: str):
    """PyTorch's SDPA backend running attention library `library` (workload.kernels.FLASH_IMPLEMENTATIONS)."""
    from torch.nn.attention import SDPBackend

    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "xformers": SDPBackend.EFFICIENT_ATTENTION, "pytorch": SDPBackend.MATH}
    if library not in backends:
        raise Unsupported(f"{library} attention has no PyTorch SDPA backend")
    return backends[library]


def _attention(spec: KernelSpec, dtype: torch.dtype, device: str) -> Callable[[], object]:
    """SDPA on the backend of the spec's library on a GPU (PyTorch's own choice on the CPU, which has only its
    math backend)."""
    from torch.nn.attention import sdpa_kernel

    s = dict(spec.shape)
    if not s["v_dim"]:
        raise Unsupported(f"{spec.name} scores keys without values (DeepSeek sparse attention's indexer loss): no "
                          "SDPA stand-in")
    if device == "cuda" and max(s["qk_dim"], s["v_dim"]) > SDPA_FUSED_HEAD_DIM:
        raise Unsupported(f"heads of {max(s['qk_dim'], s['v_dim'])} (MLA's MQA form) exceed the fused SDPA "
                          f"backends' {SDPA_FUSED_HEAD_DIM}")
    backend = _sdpa_backend(attention_impl(spec)) if device == "cuda" else None
    b, h, kv = int(s["batch"]), int(s["heads"]), int(s["kv_heads"])
    backward = spec.phase != Phase.fwd
    q = _randn(b, h, int(s["seq_q"]), int(s["qk_dim"]), dtype=dtype, device=device, grad=backward)
    k = _randn(b, kv, int(s["seq_k"]), int(s["qk_dim"]), dtype=dtype, device=device, grad=backward)
    v = _randn(b, kv, int(s["seq_k"]), int(s["v_dim"]), dtype=dtype, device=device, grad=backward)
    causal = bool(s["causal"])

    def forward() -> torch.Tensor:  # grouped-query heads share keys and values, as the fused kernels read them
        if backend is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv != h)
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv != h)

    if not backward:
        return forward
    out = forward()
    grad = torch.randn_like(out)
    return lambda: out.backward(grad, retain_graph=True)


def _memory(spec: KernelSpec, point: SweepPoint, kernels: LayerKernels, dtype: torch.dtype,
            device: str) -> Callable[[], object]:
    name, sh, h = spec.name, kernels.shape, kernels.model.hidden_size
    backward = spec.phase not in (Phase.fwd, Phase.step)
    if name.endswith("_norm") and name != "mamba_out_norm":  # a hidden-state norm (the Mamba output's: copied below)
        # MLA's latent norms (LATENT_NORMS) run on the latent's width
        h = next((latent.width for latent in kernels.latents if latent.norm == name), h)
        x = _randn(sh.norm_tokens, h, dtype=dtype, device=device, grad=backward)
        w = torch.ones(h, dtype=dtype, device=device, requires_grad=backward)
        if kernels.model.normalization == "rmsnorm":
            return _autograd(lambda: F.rms_norm(x, (h,), w, 1e-5), backward)
        return _autograd(lambda: F.layer_norm(x, (h,), w), backward)
    if name.endswith("_residual"):
        x, y = (_randn(sh.norm_tokens, h, dtype=dtype, device=device) for _ in range(2))
        return (lambda: y.copy_(x)) if backward else (lambda: torch.add(x, y))
    if name.endswith("_act"):
        up = kernels[name.removesuffix("_act") + "_linear1"][Phase.fwd]
        return _activation(int(up.param("m")), int(up.param("n")), kernels.model.gated_mlp, backward, dtype, device)
    if name in ("moe_permute", "moe_unpermute"):
        routed = int(kernels["moe_expert_linear1"][Phase.fwd].param("m"))
        x = _randn(routed, h, dtype=dtype, device=device)
        index = torch.randperm(routed, device=device)
        return (lambda: torch.zeros_like(x).index_add_(0, index, x)) if backward else (lambda: x.index_select(0, index))
    if name == "embedding":
        table = _randn(kernels.vocab_shard, h, dtype=dtype, device=device)
        ids = torch.randint(0, kernels.vocab_shard, (sh.norm_tokens,), device=device)
        if spec.phase == Phase.bwd_wg:  # the dense table gradient, added into the main gradient (embedding_specs)
            grad = _randn(sh.norm_tokens, h, dtype=dtype, device=device)
            main = torch.zeros_like(table, dtype=torch.float32 if kernels.shape.grad_bytes == 4 else dtype)
            return lambda: main.add_(torch.ops.aten.embedding_dense_backward(grad, ids, kernels.vocab_shard, -1, False))
        return lambda: F.embedding(ids, table)
    if name == "loss":
        logits = _randn(sh.tokens, kernels.vocab_shard, dtype=dtype, device=device, grad=backward)
        target = torch.randint(0, kernels.vocab_shard, (sh.tokens,), device=device)
        return _autograd(lambda: F.cross_entropy(logits.float(), target), backward)
    if name in ("grad_zero", "grad_check", "grad_check_scale"):  # over fp32 gradients: bytes / 4 / passes
        passes = CHECK_SCALE_PASSES if name == "grad_check_scale" else CHECK_PASSES
        grads = torch.randn(max(round(spec.bytes / 4 / passes), 1), device=device)
        if name == "grad_zero":
            return grads.zero_
        if name == "grad_check":
            return lambda: torch.linalg.vector_norm(grads).isnan()
        return lambda: (torch.linalg.vector_norm(grads).isnan(), grads.mul_(0.5))
    if name == "optimizer":
        return _megatron_step(round(spec.bytes / optimizer_kernel(1, megatron_buffers=True).bytes), dtype, device)
    elements = max(round(spec.bytes / 2 / (torch.finfo(dtype).bits / 8)), 1)  # unknown kernel: copy its bytes
    src = _randn(elements, dtype=dtype, device=device)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def swiglu(y: torch.Tensor) -> torch.Tensor:
    """SwiGLU of the gate and up halves of one tensor, as Megatron-Core's fused_bias_swiglu.swiglu computes it."""
    gate, up = torch.chunk(y, 2, -1)
    return F.silu(gate) * up


def swiglu_back(g: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """SwiGLU's input gradient (both halves in one tensor), as Megatron-Core's swiglu_back computes it."""
    gate, up = torch.chunk(y, 2, -1)
    sig = torch.sigmoid(gate)
    return torch.cat((g * sig * (1 + gate * (1 - sig)) * up, g * F.silu(gate)), -1)


# The tanh approximation of GELU (Hendrycks & Gimpel 2016): 0.79788456 = sqrt(2/pi), 0.044715 its cubic term, and
# 0.1070322243 = 3 * 0.044715 * sqrt(2/pi) in the derivative; the constants Megatron-Core's fused_bias_gelu writes.
def gelu(x: torch.Tensor) -> torch.Tensor:
    """The tanh GELU as Megatron-Core's fused_bias_gelu computes it (no bias: the Llama-style layers have none)."""
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def gelu_back(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The tanh GELU's input gradient, as Megatron-Core's bias_gelu_back computes it."""
    tanh_out = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
    ff = 0.5 * x * ((1 - tanh_out * tanh_out) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1 + tanh_out)
    return ff * g


def fuser(device: str) -> Callable[[Callable], Callable]:
    """What Megatron-Core's jit_fuser is (megatron/core/jit.py: torch.compile from torch 2.2 on), on a GPU: each
    stand-in compiled afresh for its one static shape, as a training run compiles its constant shapes
    (torch.compile(dynamic=True), one compilation for every shape, gave most SwiGLU forwards 5% of an H100's HBM
    bandwidth, where the static kernel streams at 90%). The plain function on the CPU, or where compiling fails (no
    C compiler for Triton, say), which is printed once: the activation is then timed unfused."""
    if device != "cuda" or not compiles(device):
        return lambda fn: fn
    torch.compiler.reset()  # a fresh compilation per shape, never the recompile limit's eager fallback
    return torch.compile


@cache
def compiles(device: str) -> bool:
    """Whether torch.compile works on `device` here (said once when it does not)."""
    try:
        torch.compile(swiglu)(torch.ones(4, 8, device=device, dtype=torch.bfloat16))
        return True
    except Exception as exc:  # any compiler failure means: time the eager ops
        first = (str(exc).splitlines() or [""])[0]
        print(f"  torch.compile fails here ({type(exc).__name__}: {first}); activations are timed unfused")
        return False


def _activation(rows: int, width: int, gated: bool, backward: bool, dtype: torch.dtype,
                device: str) -> Callable[[], object]:
    """The MLP activation as Megatron-Core runs it: one fused kernel forward (SwiGLU over the gate and up halves of
    the first linear's output, or GELU) and one backward, each through its jit_fuser (compiled at the first of the
    timing's warm-up runs)."""
    fuse = fuser(device)
    y = _randn(rows, 2 * width if gated else width, dtype=dtype, device=device)
    forward, back = (fuse(swiglu), fuse(swiglu_back)) if gated else (fuse(gelu), fuse(gelu_back))
    if not backward:
        return lambda: forward(y)
    g = _randn(rows, width, dtype=dtype, device=device)
    return lambda: back(g, y)


def _megatron_step(params: int, dtype: torch.dtype, device: str) -> Callable[[], object]:
    """Megatron's step (optimizer_kernel): the fp32 gradients' norm for clipping, Adam on the fp32 master weights,
    and the master weights cast into the model's 16-bit ones."""
    master = torch.zeros(max(params, 1), device=device, requires_grad=True)
    master.grad = torch.randn_like(master)
    model = torch.empty_like(master, dtype=dtype)
    opt = torch.optim.Adam([master], fused=device == "cuda", foreach=None if device == "cuda" else True)
    return lambda: (torch.linalg.vector_norm(master.grad), opt.step(), model.copy_(master))


def _autograd(forward: Callable[[], torch.Tensor], backward: bool) -> Callable[[], object]:
    """The forward, or (for a backward kernel) the backward of one forward run beforehand."""
    if not backward:
        return forward
    out = forward()
    grad = torch.randn_like(out)
    return lambda: out.backward(grad, retain_graph=True)

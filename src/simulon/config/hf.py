"""`model: {from_hf: path/to/config.json}`: a model block built from a HuggingFace `config.json`.

The keys read are those of the transformers configuration classes of the decoder-only families simulon
models (LlamaConfig, MistralConfig, MixtralConfig, Qwen2/Qwen3(-MoE)Config, DeepseekV3Config,
GptOssConfig, Gemma/Gemma2/Gemma3TextConfig, Phi3Config; a multimodal config's `text_config`):

- shape: num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads (GPT-BigCode's and Falcon-7B's
  multi_query: one; Falcon's num_kv_heads), head_dim, intermediate_size (Falcon's ffn_hidden_size), vocab_size,
  tie_word_embeddings (absent: its configuration class's default, tied in GPT-2, OPT, BLOOM, Falcon, Gemma and the
  other TIED_MODEL_TYPES, untied elsewhere); encoder-only and encoder-decoder families are refused
  (ENCODER_MODEL_TYPES, ENCODER_DECODER_MODEL_TYPES, is_encoder_decoder);
- activation: hidden_act (Gemma's hidden_activation); the MLPs of the families above always gate it
  (down_proj(act(gate_proj x) * up_proj x): LlamaMLP, MixtralBlockSparseTop2MLP, Qwen3MoeMLP, DeepseekV3MLP,
  GemmaMLP, ...), GeGLU for a GELU, else SwiGLU, whatever hidden_act names; in other families `silu` is SwiGLU,
  `relu` ReLU, `relu2` squared ReLU, anything else a plain GELU; where the file names none, its family's
  configuration-class default (DEFAULT_ACTIVATIONS), and a file of another family must name it; normalization: RMSNorm
  in the families that use it (RMSNORM_MODEL_TYPES) and where the config has rms_norm_eps, else LayerNorm; a
  vocabulary left out is its configuration class's where the family's files leave it so, as are its heads and head
  size (CLASS_DEFAULTS: Gemma 3's text_config);
- dropout: the largest of the hidden and attention dropouts the file gives (DROPOUT_KEYS: GPT-2's resid_pdrop,
  embd_pdrop and attn_pdrop, OPT's dropout, attention_dropout, ...);
- position embedding: rotary, unless the family learns its positions (GPT-2, OPT: LEARNED_POSITION_MODEL_TYPES), has
  none (Nemotron-H) or biases its attention by ALiBi (BLOOM; Falcon's and MPT's where their config says so); a rotary
  model's NoPE layers (nope_every) where no_rope_layers marks them 0, else every no_rope_layer_interval-th (Llama 4:
  4 by default);
- mixture of experts: num_local_experts (Mixtral, GPT-OSS) or num_experts (Qwen-MoE) or n_routed_experts
  (DeepSeek-V3), num_experts_per_tok, moe_intermediate_size (else intermediate_size), n_shared_experts (Ling's and
  Trinity's num_shared_experts; 0: none) or shared_expert_intermediate_size (Llama 4: always one shared expert of
  intermediate_size, Llama4TextMoe's shared_expert, which no key names), first_k_dense_replace (Trinity's and
  LFM2-MoE's num_dense_layers: the first layers' MLPs dense), node-limited routing's n_group and topk_group
  (DeepSeek-V3; both default 1; unread under DeepSeek-V2's topk_method greedy);
  layouts that interleave dense and MoE layers (decoder_sparse_step, moe_layer_freq, interleave_moe_layer_step above
  1 or moe_layers, mlp_only_layers) as MoESpec.layer_freq, the dense layers intermediate_size_mlp wide where the
  config has it (Llama 4);
- multi-head latent attention: kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim; its sparse
  attention (DeepseekV32Config): index_n_heads, index_head_dim, index_topk;
- multi-token prediction: num_nextn_predict_layers (DeepSeek-V3, GLM-4.5; 0 in Kimi K2's: none; Qwen3.5's
  mtp_num_hidden_layers); a hybrid's MTP depths follow its pattern after '/' (config/hybrid.py): NemotronH's
  mtp_hybrid_override_pattern (or mtp_layers_block_type, the same as a list of block names; neither: its class's
  attention then experts), Qwen3-Next's and
  Qwen3.5's full-attention layer with the decoder's experts or MLP (their MTP module's one decoder layer);
- gated delta net hybrids (Qwen3NextConfig, Qwen3.5): linear_num_key_heads, linear_num_value_heads,
  linear_key_head_dim, linear_value_head_dim, linear_conv_kernel_dim, and layer_types (or full_attention_interval),
  each layer two symbols of the hybrid pattern (G or *, then E or -); attn_output_gate (Qwen3-Next's attention is
  gated: true unless the file says otherwise);
- sliding-window attention: sliding_window where layer_types name sliding_attention layers (every one, or every N-th
  layer full); where the file leaves layer_types to its configuration class, GPT-OSS's and Gemma 2's (alternating from a
  sliding layer: GptOssConfig, Gemma2Config), Gemma 3's and Cohere 2's (every sliding_window_pattern-th layer full, 6
  and 4 by default: Gemma3TextConfig, Cohere2Config), Trinity's (every global_attn_every_n_layers-th, 4 by default:
  AfmoeConfig) and Mistral's, Mixtral's, Phi-3's and StarCoder2's (every layer:
  their attention passes sliding_window to every layer); layer_types beside sliding_window must give each of
  num_hidden_layers layers sliding_attention or full_attention; Llama 4's chunked attention (Llama4TextConfig:
  attention_chunk_size, 8,192 by default, in the layers layer_types names chunked_attention, else those no_rope_layers
  marks 1, else all but every no_rope_layer_interval-th, 4) as a chunked window (sliding_window.chunked); a config
  whose full-attention layers have a head size of their own (global_head_dim, Gemma 4) is refused, as is one that gives
  its experts or its layer layout under keys this reader does not take (UNREAD_KEYS: ERNIE 4.5's moe_num_experts,
  Jamba's layer periods, Kimi Linear's linear_attn_config, Llama 3.2 Vision's cross_attention_layers, Nemotron 3
  Super's latent experts, moe_latent_size), or layers of
  kinds it does not model (layer_types naming another kind than READ_LAYER_TYPES: LFM2's conv, Granite 4.0-H's mamba;
  MiniMax's lightning attention; Ling's and Ring's linear attention, layer_group_size);
- hybrid Mamba models (NemotronHConfig, model_type nemotron_h): hybrid_override_pattern (or layers_block_type or its
  alias layer_types, the same as a list of block names, transformers 5's naming the Mamba mixer linear_attention;
  num_hidden_layers their length where the file leaves it out), mamba_num_heads, mamba_head_dim, ssm_state_size,
  n_groups, conv_kernel, chunk_size; the MLP's activation from mlp_hidden_act, the shared expert's width from
  moe_shared_expert_intermediate_size, the attention's head size from head_dim or attention_head_dim. Models that
  are no transformer are refused by model_type (UNREAD_MODEL_TYPES: pure Mamba-1 models such as Falcon Mamba, whose
  mixer is not simulon's Mamba-2 one, RWKV, xLSTM, RecurrentGemma), and so is a file of another family that sizes a
  Mamba mixer but lays out its layers under no key read here (SSM_KEYS: Bamba, Falcon-H1).

Keys written beside `from_hf` in the block override what the file gives; `from` beside it is refused (a block
starts from a template or from a config file, not both). A key set to null reads as absent, as its configuration
class reads it. A missing, malformed or repeated key is an error naming the file and the key (json alone would keep
a repeated key's last value without a word); so is a key the model block's own checks refuse beside the file's others
(first_k_dense_replace above num_hidden_layers, num_experts_per_tok above the experts), in the keys' names (FIELD_KEYS),
unless a key written beside `from_hf` is in it, which is named as the scenario writes it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import MAX_DROPOUT, MAX_LAYERS, FieldError
from .errors import MAX_YAML_BYTES, EmptyJSON, JSONTooDeep, parse_json, read_input_text
from .hybrid import MTP_SEPARATOR, split_mtp
from .templates import AmbiguousTemplate, merged, scenario_path, template_stem_loose

GATED_ACTIVATIONS = {"silu": "swiglu", "swish": "swiglu", "swiglu": "swiglu", "relu2": "squared_relu", "relu": "relu"}
"""hidden_act -> simulon's activation in a family not known to gate its MLP (GATED_MLP_MODEL_TYPES): a SiLU MLP is
gated there too (SwiGLU), the rest as named (GELU for any but ReLU and squared ReLU)."""
GEMMA_MODEL_TYPES = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text"})
"""model_type of the Gemma families (GemmaConfig, Gemma2Config, Gemma3TextConfig)."""
QWEN3_5_MODEL_TYPES = frozenset({"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"})
"""model_type of Qwen3.5 (Qwen3_5Config, Qwen3_5MoeConfig and their text_config's Qwen3_5TextConfig,
Qwen3_5MoeTextConfig): Qwen3-Next's layers, RMSNorm (Qwen3_5RMSNorm, rms_norm_eps 1e-6 by default) and a gated SiLU
MLP (Qwen3_5MLP, hidden_act "silu" by default) whatever the file writes."""
GATED_MLP_MODEL_TYPES = frozenset({
    "llama", "llama4", "llama4_text", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
    "deepseek_v2", "deepseek_v3", "gpt_oss", "phi3", "glm4_moe", "olmo", "olmo2", "olmoe", "granite", "granitemoe",
    "cohere", "kimi_k2", *GEMMA_MODEL_TYPES, *QWEN3_5_MODEL_TYPES})
"""model_type of the families whose MLP (and experts) always gate, whatever hidden_act names: down_proj(act(gate_proj
x) * up_proj x) in LlamaMLP, MistralMLP, MixtralBlockSparseTop2MLP, Qwen2MLP, Qwen3MoeMLP, DeepseekV3MLP, Phi3MLP
(gate_up_proj), GemmaMLP, ...; GptOssExperts' gate_up_proj. Their MLP reads as GeGLU where the activation is a GELU,
else SwiGLU: simulon tells activations apart by their gate alone (ModelSpec.gated_mlp), which doubles the first
projection's weights and FLOPs, and has no name for a gate of ReLU or tanh."""
GELU_ACTIVATIONS = frozenset({"gelu", "gelu_10", "gelu_fast", "gelu_new", "gelu_python", "gelu_pytorch_tanh",
                              "gelu_accurate", "quick_gelu", "fast_gelu"})
"""transformers' GELU activations (ACT2FN), exact or approximate."""
TIED_MODEL_TYPES = GEMMA_MODEL_TYPES | frozenset({
    "gpt2", "openai-gpt", "gpt_neo", "gpt_bigcode", "starcoder2", "opt", "bloom", "falcon", "mpt", "cohere", "cohere2",
    "xglm", "biogpt", "ctrl", "smollm3", "ernie4_5", "ernie4_5_moe", "lfm2", "lfm2_moe", "jetmoe", "minicpm3",
    "recurrent_gemma", "vaultgemma"})
"""model_type of the decoder families whose configuration class ties the embeddings unless the file says otherwise
(`tie_word_embeddings: bool = True` in transformers 5.25.0's GPT2Config, OPTConfig, BloomConfig, FalconConfig,
Starcoder2Config, CohereConfig, GemmaConfig, ...; save_pretrained leaves a value equal to its class's default out of
config.json, so GPT-2's and OPT's files never write it); elsewhere an absent key reads untied, the default of
LlamaConfig, MistralConfig, Qwen3Config, DeepseekV3Config, GptOssConfig, GPTNeoXConfig, PhiConfig and the rest."""
WINDOW_EVERY_LAYER_MODEL_TYPES = frozenset({"mistral", "mixtral", "phi3", "starcoder2"})
"""model_type of the families whose attention windows every layer by sliding_window (no layer_types): MixtralAttention
is MistralAttention's copy, its sliding_window from the config in every layer (Mixtral 8x7B's and 8x22B's files set
it to null: no window)."""
WINDOW_PATTERN_DEFAULTS = {"gpt_oss": 2, "gemma2": 2, "gemma3": 6, "gemma3_text": 6, "cohere2": 4, "afmoe": 4}
"""model_type -> every how many layers one attends to the whole context where the file leaves layer_types to its
configuration class (GptOssConfig, Gemma2Config: alternating from a sliding layer; Gemma3TextConfig: its
sliding_window_pattern, 6 by default; Cohere2Config: its sliding_window_pattern, 4 by default, which Command R7B's and
Command A's files on the Hub give without layer_types; AfmoeConfig: its global_attn_every_n_layers, 4 by default,
which Trinity Nano's file gives without layer_types), layer i full where (i + 1) % N == 0."""
WINDOW_PATTERN_KEYS = {"afmoe": "global_attn_every_n_layers"}
"""model_type -> the key its file gives WINDOW_PATTERN_DEFAULTS' count under, where that is not sliding_window_pattern
(AfmoeConfig's global_attn_every_n_layers)."""
HF_ACTIVATIONS = frozenset({
    "gelu", "gelu_10", "gelu_fast", "gelu_new", "gelu_python", "gelu_pytorch_tanh", "gelu_accurate", "quick_gelu",
    "fast_gelu", "laplace", "leaky_relu", "linear", "mish", "relu", "relu2", "relu6", "sigmoid", "silu", "swish",
    "swiglu", "tanh", "prelu", "xielu"})
"""The activation names transformers knows (its ACT2FN table, and swiglu): one outside them is no config a model
was trained from, and is refused rather than read as GELU."""
DEFAULT_ACTIVATIONS = {
    **dict.fromkeys(("llama", "llama4", "llama4_text", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                     "qwen3_next", "deepseek_v2", "deepseek_v3", "gpt_oss", "phi3", "glm4_moe", "olmo", "olmo2",
                     "olmoe", "granite", "granitemoe", "cohere", *QWEN3_5_MODEL_TYPES), "silu"),
    **dict.fromkeys(("gemma", "gemma2", "gemma3", "gemma3_text", "starcoder2"), "gelu_pytorch_tanh"),
    **dict.fromkeys(("nemotron", "nemotron_h"), "relu2"),
    "gpt_neox": "gelu", "gpt2": "gelu_new", "phi": "gelu_new", "falcon": "gelu",
}
"""model_type -> the MLP activation its transformers configuration class defaults to (hidden_act, hidden_activation or
mlp_hidden_act in LlamaConfig, MixtralConfig, Qwen3MoeConfig, DeepseekV3Config, GemmaConfig, NemotronHConfig, ...),
for a file that names none; a file of a family not listed must name its activation (a guess of GELU would drop the
gate of a SwiGLU MLP, a third of its weights)."""
RMSNORM_MODEL_TYPES = frozenset({
    "llama", "llama4", "llama4_text", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
    "deepseek_v2", "deepseek_v3", "gpt_oss", "phi3", "olmo2", "olmoe", "granite", "granitemoe", "nemotron_h",
    *GEMMA_MODEL_TYPES, *QWEN3_5_MODEL_TYPES})
"""model_type of the families whose layers normalize with RMSNorm (LlamaRMSNorm, Qwen3RMSNorm, Gemma3RMSNorm,
NemotronHRMSNorm, ...) whether or not the file writes rms_norm_eps; another family's file is RMSNorm where it has
rms_norm_eps, else LayerNorm (GPT-2, GPT-NeoX, Phi, StarCoder2, Cohere)."""
FOUR_X_MLP_MODEL_TYPES = frozenset({"gpt2", "gpt_bigcode", "falcon"})
"""model_type of the families whose MLP is four times the hidden size where n_inner (Falcon's ffn_hidden_size) is null
or absent (GPT2Config, GPTBigCodeConfig: `n_inner if n_inner is not None else 4 * hidden_size`; FalconConfig's
ffn_hidden_size likewise)."""
GEMMA3_TEXT_DEFAULTS = {"vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 4096}
"""Gemma3TextConfig's defaults of the keys read here (transformers' configuration_gemma3.py)."""
CLASS_DEFAULTS = {"gemma3_text": GEMMA3_TEXT_DEFAULTS, "gemma3": GEMMA3_TEXT_DEFAULTS}
"""model_type -> the defaults of its configuration class for the shape keys a file leaves out: the text_config of Gemma
3's multimodal checkpoints writes only what differs from Gemma3TextConfig's defaults (google/gemma-3-12b-pt's holds no
vocab_size and no head_dim, whose 256 is not hidden_size / num_attention_heads = 240; gemma-3-4b-pt's no
num_attention_heads, 8, nor num_key_value_heads, 4)."""
UNMODELLED = ", which simulon does not model"
MAMBA_1_MIXERS = ("Mamba-1 mixers (a selective scan with a state per channel, its step and B and C projected by x_proj "
                  f"and dt_proj){UNMODELLED}: its Mamba mixer (hybrid_pattern M) is Mamba-2's (one decay per head, B "
                  "and C shared by groups, a chunked scan), and writing the model as one would simulate another model")
"""Why a Mamba-1 layer (Gu and Dao, arXiv 2312.00752; transformers' MambaMixer, FalconMambaMixer and JambaMambaMixer)
is no layer simulon models."""
MAMBA_1 = f"its layers are {MAMBA_1_MIXERS}"
SSM_KEYS = ("state_size", "ssm_state_size", "mamba_d_state", "time_step_rank")
"""Keys of a state-space (Mamba) mixer's size (MambaConfig's and FalconMambaConfig's state_size and time_step_rank,
NemotronHConfig's ssm_state_size, BambaConfig's, FalconH1Config's and Zamba2Config's mamba_d_state): a file holding one
but no layer layout (FIELD_KEYS["hybrid_pattern"]) is refused, not read as a transformer of attention layers alone."""
ENCODER_MODEL_TYPES = frozenset({
    "bert", "roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "deberta", "deberta-v2", "distilbert", "electra",
    "albert", "modernbert", "mpnet", "megatron-bert", "ernie", "bert-generation", "big_bird", "longformer", "esm"})
"""model_type of encoder-only families (BertConfig, RobertaConfig, DebertaV2Config, ModernBertConfig, ...): every
token attends to the whole sequence and there is no causal language-model head, which simulon's decoder is not."""
ENCODER_DECODER_MODEL_TYPES = frozenset({
    "t5", "mt5", "umt5", "longt5", "switch_transformers", "bart", "mbart", "pegasus", "pegasus_x", "marian", "m2m_100",
    "nllb-moe", "whisper", "t5gemma", "t5gemma2", "led", "plbart", "prophetnet", "blenderbot", "blenderbot-small"})
"""model_type of encoder-decoder families (T5Config, BartConfig, WhisperConfig, ...; a file of another family says so
with is_encoder_decoder: true): two stacks with cross-attention, which simulon's decoder is not."""
UNREAD_MODEL_TYPES = {
    **dict.fromkeys(ENCODER_MODEL_TYPES, "an encoder-only model: its tokens attend both ways and it has no "
                                         "language-model decoder, which simulon models: write its model block "
                                         "yourself"),
    **dict.fromkeys(ENCODER_DECODER_MODEL_TYPES, "an encoder-decoder model: simulon models one decoder stack, "
                                                 "without cross-attention: write its model block yourself"),
    "mamba2": "a pure Mamba-2 model (Mamba2Config), which has no attention layers: write its model block yourself (a "
              "hybrid's layers as hybrid_pattern, its Mamba mixer as mamba)",
    "jamba": f"Jamba (JambaConfig; Jamba 1.5 Mini and Large), a hybrid whose Mamba layers, seven in eight, are "
             f"{MAMBA_1_MIXERS}",
    **{model_type: f"{what}, which is no transformer: {why}" for model_type, what, why in (
        ("mamba", "a pure Mamba-1 model (MambaConfig)", MAMBA_1),
        ("falcon_mamba", "a pure Mamba-1 model (FalconMambaConfig, Falcon Mamba)", MAMBA_1),
        ("rwkv", "an RWKV model (RwkvConfig)",
         f"its layers are time-mixing and channel-mixing recurrences{UNMODELLED}"),
        ("xlstm", "an xLSTM model (xLSTMConfig)", f"its layers are mLSTM recurrences{UNMODELLED}"),
        ("recurrent_gemma", "RecurrentGemma (RecurrentGemmaConfig, Griffin)",
         f"two of every three layers are RG-LRU recurrences{UNMODELLED}"))},
}
"""model_type of the families this reader does not build, and why; a hybrid Mamba model is a model block with its
hybrid_pattern and mamba block (NemotronHConfig files are read). A Mamba-1 model is refused outright: simulon's Mamba
mixer is Mamba-2's (config/hybrid.py MambaSpec), and writing a Mamba-1 model as one would simulate another model."""
BLOCK_TYPES = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-", "moe": "E"}
"""NemotronH's layers_block_type names -> the hybrid pattern's symbols (config/hybrid.py): transformers 5's
NemotronHConfig names its Mamba-2 mixer linear_attention and its attention full_attention (remap_legacy_layer_types
renames the legacy mamba and attention so), beside moe and mlp."""
NEMOTRON_H_LAYOUT_KEYS = ("hybrid_override_pattern", "layers_block_type", "layer_types")
"""Where a NemotronH file lays out its layers: the pattern, or the list of block names under its field's name or
layer_types, the name NemotronHConfig's attribute_map reads as layers_block_type; its layer count is their length
(NemotronHConfig.num_hidden_layers), where the file leaves num_hidden_layers out."""
NEMOTRON_H_MTP_KEYS = ("mtp_hybrid_override_pattern", "mtp_layers_block_type", "mtp_layer_types")
"""Where a NemotronH file names a multi-token-prediction depth's blocks, as NEMOTRON_H_LAYOUT_KEYS its layers."""
UNGROUPED_TOPK_METHOD = "greedy"
"""DeepseekV2's `topk_method` that routes each token to its top-k experts whatever their group: n_group and topk_group
are then not read (modeling_deepseek.py MoEGate; group_limited_greedy and DeepSeek-V3's noaux_tc route by group)."""
SPARSE_STEP_KEYS = ("decoder_sparse_step", "interleave_moe_layer_step")
"""Keys placing the experts in every step-th layer, counting from layer step - 1 (Qwen-MoE, Llama 4)."""
FIELD_KEYS: dict[str, tuple[str, ...]] = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_heads": ("num_attention_heads", "n_head"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads"),
    "head_dim": ("head_dim", "attention_head_dim"),
    "ffn_hidden_size": ("intermediate_size_mlp", "intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"),
    "vocab_size": ("vocab_size",),
    "tie_embeddings": ("tie_word_embeddings",),
    "attention_output_gate": ("attn_output_gate",),
    "mtp_layers": ("num_nextn_predict_layers", "mtp_num_hidden_layers"),
    "hybrid_pattern": ("hybrid_override_pattern", "layers_block_type", "layer_types", "full_attention_interval"),
    "moe": ("num_local_experts", "num_experts", "n_routed_experts"),
    "moe.num_experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "moe.top_k": ("num_experts_per_tok", "experts_per_token"),
    "moe.expert_ffn_hidden_size": ("moe_intermediate_size", "intermediate_size"),
    "moe.first_dense_layers": ("first_k_dense_replace", "num_dense_layers"),
    "moe.num_groups": ("n_group",),
    "moe.group_topk": ("topk_group",),
    "moe.layer_freq": ("moe_layer_freq", "moe_layers", *SPARSE_STEP_KEYS, "mlp_only_layers"),
    "moe.num_shared_experts": ("n_shared_experts", "num_shared_experts"),
    "moe.shared_expert_ffn_hidden_size": ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
                                          "moe_intermediate_size", "intermediate_size"),
    **{f"mla.{key}": (key,) for key in ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                        "v_head_dim")},
    "mla.dsa.index_heads": ("index_n_heads",),
    "mla.dsa.index_head_dim": ("index_head_dim",),
    "mla.dsa.index_topk": ("index_topk",),
    "mamba.num_heads": ("mamba_num_heads",),
    "mamba.head_dim": ("mamba_head_dim",),
    "mamba.state_size": ("ssm_state_size",),
    "mamba.num_groups": ("n_groups",),
    "mamba.conv_kernel": ("conv_kernel",),
    "mamba.chunk_size": ("chunk_size",),
    "gdn.key_heads": ("linear_num_key_heads",),
    "gdn.value_heads": ("linear_num_value_heads",),
    "gdn.key_head_dim": ("linear_key_head_dim",),
    "gdn.value_head_dim": ("linear_value_head_dim",),
    "gdn.conv_kernel": ("linear_conv_kernel_dim",),
    "sliding_window": ("sliding_window",),
    "sliding_window.size": ("sliding_window",),
    "sliding_window.full_every": ("layer_types", "sliding_window_pattern", "global_attn_every_n_layers"),
}
"""simulon's model field (dotted, below the model block) -> the config.json keys it is read from, the first one set
winning: where the reader reads each field, and which keys an error of the model block's own checks (ModelSpec: a
top-k above the experts, a first_k_dense_replace above the layers) names, as the file gives them."""


class HFConfigError(ValueError):
    """A config.json simulon cannot read as a model; the message names the file and the key."""


def read_config(path: Path) -> dict[str, Any]:
    """The config's mapping (its `text_config` for a multimodal model) over its class's defaults (CLASS_DEFAULTS)."""
    try:
        doc = parse_json(read_input_text(path, MAX_YAML_BYTES, "a HuggingFace config"),
                         object_pairs_hook=_unique_keys)
    except RepeatedKey as exc:
        raise HFConfigError(f"HuggingFace config {str(path)!r}: key {exc.key!r} is given twice (which one is "
                            f"meant?)") from None
    except OSError as exc:
        raise HFConfigError(f"cannot read HuggingFace config {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise HFConfigError(f"HuggingFace config {str(path)!r} is not UTF-8 text") from None
    except EmptyJSON:
        raise HFConfigError(f"HuggingFace config {str(path)!r} is empty: expected a model's config.json (a JSON "
                            "object of its sizes)") from None
    except json.JSONDecodeError as exc:
        raise HFConfigError(f"HuggingFace config {str(path)!r} is not valid JSON (line {exc.lineno}: "
                            f"{exc.msg})") from None
    except JSONTooDeep as exc:
        raise HFConfigError(f"HuggingFace config {str(path)!r} is not JSON simulon reads: {exc}") from None
    except ValueError as exc:  # a device, a pipe, a file larger than any config
        raise HFConfigError(f"cannot read HuggingFace config {str(path)!r}: {exc}") from None
    if not isinstance(doc, dict):
        raise HFConfigError(f"HuggingFace config {str(path)!r} does not hold a JSON object")
    text = doc.get("text_config")
    doc = {**doc, **text} if isinstance(text, dict) else doc
    model_type = doc.get("model_type")
    if model_type == "nemotron_h" and doc.get("num_hidden_layers") is None:
        layout = next((doc[key] for key in NEMOTRON_H_LAYOUT_KEYS if isinstance(doc.get(key), str | list)), None)
        doc = doc if layout is None else {**doc, "num_hidden_layers": len(layout)}
    return {**CLASS_DEFAULTS.get(model_type, {}), **doc} if isinstance(model_type, str) else doc


HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")
"""A HuggingFace Hub model id ("meta-llama/Llama-3.1-8B"), which from_hf may be given in place of a file's path (a
path of this form ending in .json, "configs/llama.json", is a file's)."""


class RepeatedKey(ValueError):
    """A JSON object holding one key twice (json keeps the last without a word)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's mapping, refusing a key given twice."""
    doc: dict[str, Any] = {}
    for key, value in pairs:
        if key in doc:
            raise RepeatedKey(key)
        doc[key] = value
    return doc


class Reader:
    """Typed access to one config's keys, each error naming the file and the key."""

    def __init__(self, path: Path, doc: dict[str, Any]):
        self.path, self.doc = path, doc

    def fail(self, key: str, problem: str) -> HFConfigError:
        return HFConfigError(f"HuggingFace config {str(self.path)!r}: key {key!r} {problem}")

    def layers(self) -> int:
        """The decoder's layer count, refused above MAX_LAYERS before anything is built a layer at a time (a
        per-layer list of 10^8 entries took gigabytes before the model block's own bound was read)."""
        layers = self.integer(*FIELD_KEYS["num_layers"])
        if layers > MAX_LAYERS:
            key = next(k for k in FIELD_KEYS["num_layers"] if self.doc.get(k) is not None)
            raise self.fail(key, f"{layers:,} is more than {MAX_LAYERS:,} layers")
        return layers

    def integer(self, *keys: str, required: bool = True, default: int | None = None, zero: bool = False) -> int | None:
        """The first of `keys` present, a positive integer, or 0 too where `zero` (a count whose 0 means none: no
        multi-token prediction, no shared expert); None, or `default`, when absent and not required."""
        key = next((k for k in keys if self.doc.get(k) is not None), None)
        if key is None:
            if required:
                others = [repr(k) for k in keys[1:]]
                also = "" if not others else " (nor is it given as " + (
                    others[0] if len(others) == 1 else f"{', '.join(others[:-1])} or {others[-1]}") + ")"
                raise self.fail(keys[0], f"is missing{also}")
            return default
        value = self.doc[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
            kind = "a non-negative integer (0: none)" if zero else "a positive integer"
            raise self.fail(key, f"must be {kind}, got {value!r}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        """A true/false key; absent or null, `default` (as its configuration class reads it)."""
        value = self.doc.get(key)
        value = default if value is None else value
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    @property
    def model_type(self) -> str:
        """The family the file names (model_type; blank where it names none)."""
        return self.text("model_type", "")

    def text(self, key: str, default: str) -> str:
        value = self.doc.get(key, default)
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {value!r}")
        return value


def _moe(cfg: Reader) -> dict[str, Any] | None:
    experts = cfg.integer(*FIELD_KEYS["moe.num_experts"], required=False)
    if experts is None:
        return None
    expert_ffn = cfg.integer(*FIELD_KEYS["moe.expert_ffn_hidden_size"])
    block: dict[str, Any] = {
        "num_experts": experts,
        "top_k": cfg.integer(*FIELD_KEYS["moe.top_k"]),
        "expert_ffn_hidden_size": expert_ffn,
        "first_dense_layers": cfg.integer(*FIELD_KEYS["moe.first_dense_layers"], required=False, default=0,
                                          zero=True),
    }
    if cfg.text("topk_method", "") != UNGROUPED_TOPK_METHOD:
        block["num_groups"] = cfg.integer(*FIELD_KEYS["moe.num_groups"], required=False, default=1)
        block["group_topk"] = cfg.integer(*FIELD_KEYS["moe.group_topk"], required=False, default=1)
    freq = _moe_layers(cfg)
    if freq != 1:
        block["layer_freq"] = freq
    return {**block, **_shared_experts(cfg, expert_ffn)}


SHARED_EXPERT_MODEL_TYPES = frozenset({"llama4", "llama4_text"})
"""model_type of the families whose MoE always holds one shared expert as wide as a routed one, under no config key
(Llama4TextMoe's shared_expert, a Llama4TextMLP of intermediate_size)."""


def _shared_experts(cfg: Reader, expert_ffn: int) -> dict[str, Any]:
    """The MoE's shared experts: n_shared_experts (Ling's and Trinity's num_shared_experts, BailingMoeConfig's and
    AfmoeConfig's; 0: none), else one where the file gives a shared expert's width (Qwen2-MoE's
    shared_expert_intermediate_size) or its family always builds one (SHARED_EXPERT_MODEL_TYPES), else none; as wide
    as that width, else as a routed expert (Ling's BailingMoeMLP of moe_intermediate_size x num_shared_experts)."""
    width = cfg.integer(*FIELD_KEYS["moe.shared_expert_ffn_hidden_size"][:2], required=False)
    always = cfg.model_type in SHARED_EXPERT_MODEL_TYPES
    shared = cfg.integer(*FIELD_KEYS["moe.num_shared_experts"], required=False, default=1 if width or always else 0,
                         zero=True)
    block: dict[str, Any] = {"num_shared_experts": shared}
    if shared:
        block["shared_expert_ffn_hidden_size"] = width or expert_ffn
    return block


def _moe_layers(cfg: Reader) -> int | list[int]:
    """Which layers hold the experts, as MoESpec.layer_freq: DeepSeek's moe_layer_freq (layer i when i % freq == 0,
    past first_k_dense_replace), or a 0/1 per layer from Qwen-MoE's decoder_sparse_step (layer i when
    (i + 1) % step == 0) and mlp_only_layers (dense whatever the step), or Llama 4's moe_layers (the layers' indices,
    which Llama4TextConfig fills from interleave_moe_layer_step where the file leaves it out: layers step - 1,
    2 step - 1, ...; Llama4TextDecoderLayer holds experts where `layer_idx in config.moe_layers`), as the transformers
    model classes build them."""
    layers = cfg.layers()
    step = 1
    for key in SPARSE_STEP_KEYS:
        step = max(step, cfg.integer(key, required=False, default=1))
    dense_only = _layer_indices(cfg, "mlp_only_layers", layers)
    if cfg.model_type in SHARED_EXPERT_MODEL_TYPES and cfg.doc.get("moe_layers") is not None:
        moe = _layer_indices(cfg, "moe_layers", layers)  # Llama4TextConfig's, over interleave_moe_layer_step's
        return 1 if set(moe) == set(range(layers)) else [int(i in moe) for i in range(layers)]
    freq = cfg.integer("moe_layer_freq", required=False, default=1)
    if step == 1 and not dense_only:
        return freq
    if freq != 1:
        raise cfg.fail("moe_layer_freq", "together with a sparse step or mlp_only_layers is not a layout any "
                                         "transformers model builds")
    return [int((i + 1) % step == 0 and i not in dense_only) for i in range(layers)]


def _layer_indices(cfg: Reader, key: str, layers: int) -> list[int]:
    """A key listing layers by their 0-based index (absent or null: none)."""
    indices = cfg.doc.get(key)
    indices = [] if indices is None else indices
    if not isinstance(indices, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers
                                                for i in indices):
        raise cfg.fail(key, f"must be a list of layer indices below {layers}, got {indices!r}")
    return indices


def _mla(cfg: Reader) -> dict[str, Any] | None:
    if cfg.doc.get("kv_lora_rank") is None:
        return None
    block = {key: cfg.integer(*FIELD_KEYS[f"mla.{key}"])
             for key in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")}
    block["q_lora_rank"] = cfg.integer(*FIELD_KEYS["mla.q_lora_rank"], required=False)
    if cfg.doc.get("index_topk") is not None:  # DeepSeek-V3.2's sparse attention
        block["dsa"] = {key: cfg.integer(*FIELD_KEYS[f"mla.dsa.{key}"])
                        for key in ("index_heads", "index_head_dim", "index_topk")}
    return block


def _hybrid_pattern(cfg: Reader) -> str | None:
    """The layers of a hybrid model, one symbol each: hybrid_override_pattern, or layers_block_type's names; then
    its multi-token-prediction depths (_mtp_depths), each after '/'."""
    if cfg.doc.get("hybrid_override_pattern") is None and cfg.doc.get("layers_block_type") is None and \
            cfg.model_type != "nemotron_h":  # another family's layer_types are read as its own
        return None
    decoder = _symbols(cfg, *NEMOTRON_H_LAYOUT_KEYS)
    if decoder is None:
        return None
    mtp = _mtp_depths(cfg)
    if not mtp:
        return decoder
    depth = _symbols(cfg, *NEMOTRON_H_MTP_KEYS)
    if depth is None and cfg.model_type == "nemotron_h":
        depth = NEMOTRON_H_MTP
    if depth is None:
        raise cfg.fail("mtp_hybrid_override_pattern", f"is missing (nor is it given as 'mtp_layers_block_type'): "
                       f"{_mtp_key(cfg)} gives {mtp} multi-token-prediction layers, whose blocks it names")
    return decoder + (MTP_SEPARATOR + depth) * mtp


NEMOTRON_H_MTP = "*E"
"""A NemotronH multi-token-prediction depth's blocks where the file names none: NemotronHConfig's default
mtp_layers_block_type, ["full_attention", "moe"] (transformers' configuration_nemotron_h.py)."""


def _symbols(cfg: Reader, pattern_key: str, *list_keys: str) -> str | None:
    """Hybrid layer symbols as `pattern_key` gives them, or as the first of `list_keys` set names its blocks
    (BLOCK_TYPES)."""
    if cfg.doc.get(pattern_key) is not None:
        return cfg.text(pattern_key, "")
    list_key = next((key for key in list_keys if cfg.doc.get(key) is not None), None)
    if list_key is None:
        return None
    types = cfg.doc[list_key]
    if not isinstance(types, list) or not all(isinstance(t, str) and t in BLOCK_TYPES for t in types):
        raise cfg.fail(list_key, f"must be a list of {', '.join(BLOCK_TYPES)}, got {types!r}")
    return "".join(BLOCK_TYPES[t] for t in types)


def _mtp_depths(cfg: Reader) -> int:
    """Multi-token-prediction layers the file gives (FIELD_KEYS' mtp_layers; absent: none)."""
    return cfg.integer(*FIELD_KEYS["mtp_layers"], required=False, default=0, zero=True)


def _mtp_key(cfg: Reader) -> str:
    """The key the file gives its multi-token-prediction layers under."""
    return next(key for key in FIELD_KEYS["mtp_layers"] if cfg.doc.get(key) is not None)


LINEAR_ATTENTION = {"linear_attention": "G", "full_attention": "*"}
"""Qwen3-Next's and Qwen3.5's layer_types -> the hybrid symbol of each layer's mixer (its MLP or experts after it)."""


def _gated_delta_net(cfg: Reader) -> dict[str, Any] | None:
    """The gated delta net block where the file gives its heads; a file whose layer_types name linear_attention
    layers without them is refused (its layers were read as all attention)."""
    if cfg.doc.get("linear_num_value_heads") is None:
        types = cfg.doc.get("layer_types")
        if isinstance(types, list) and "linear_attention" in types and cfg.model_type != "nemotron_h":
            raise cfg.fail("linear_num_value_heads", "missing: layer_types names linear_attention layers (gated "
                           "delta nets), whose heads and head sizes the linear_* keys give")
        return None
    block = {key: cfg.integer(*FIELD_KEYS[f"gdn.{key}"])
             for key in ("key_heads", "value_heads", "key_head_dim", "value_head_dim")}
    conv = cfg.integer(*FIELD_KEYS["gdn.conv_kernel"], required=False)
    if conv is not None:
        block["conv_kernel"] = conv
    return block


def _linear_attention_pattern(cfg: Reader, moe_layers: int | list[int] | None) -> str:
    """A Qwen3-Next or Qwen3.5 decoder as a hybrid pattern, two symbols a layer: its mixer (layer_types, or every
    full_attention_interval-th layer full attention, as Qwen3NextConfig fills layer_types) and then its experts (E)
    or MLP (-), as `moe_layers`, the MoE block's layer_freq, says (Qwen3NextSparseMoeBlock where decoder_sparse_step
    and mlp_only_layers put it; None: no experts)."""
    layers = cfg.layers()
    types = cfg.doc.get("layer_types")
    if types is None:
        interval = cfg.integer("full_attention_interval", required=False, default=4)
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    if not isinstance(types, list) or len(types) != layers or not all(
            isinstance(t, str) and t in LINEAR_ATTENTION for t in types):
        raise cfg.fail("layer_types", f"must be a list of {layers} of {', '.join(LINEAR_ATTENTION)}, got {types!r}")
    experts = [False] * layers if moe_layers is None else moe_layers if isinstance(moe_layers, list) else \
        [i % moe_layers == 0 for i in range(layers)]
    decoder = "".join(LINEAR_ATTENTION[kind] + ("E" if moe_layer else "-")
                      for kind, moe_layer in zip(types, experts, strict=True))
    # the MTP module's one decoder layer: full attention, then experts where the model has them (vLLM's
    # Qwen3NextMultiTokenPredictor builds Qwen3NextDecoderLayer(layer_type="full_attention"))
    return decoder + (MTP_SEPARATOR + "*" + ("-" if moe_layers is None else "E")) * _mtp_depths(cfg)


def _mamba(cfg: Reader) -> dict[str, Any] | None:
    if cfg.doc.get("mamba_num_heads") is None:
        return None
    block = {"num_heads": cfg.integer(*FIELD_KEYS["mamba.num_heads"]),
             "head_dim": cfg.integer(*FIELD_KEYS["mamba.head_dim"])}
    for key in ("state_size", "num_groups", "conv_kernel", "chunk_size"):
        value = cfg.integer(*FIELD_KEYS[f"mamba.{key}"], required=False)
        if value is not None:
            block[key] = value
    return block


def _sliding_window(cfg: Reader) -> dict[str, Any] | None:
    """A sliding window where the file has one that layers use: layer_types naming sliding_attention layers (every
    one, or every N-th layer full attention), GPT-OSS's alternation where its file leaves layer_types to
    GptOssConfig (sliding_attention first), Gemma 3's, Cohere 2's and Trinity's every N-th layer full
    (WINDOW_PATTERN_DEFAULTS), Mistral's sliding_window on every layer."""
    size = cfg.integer(*FIELD_KEYS["sliding_window.size"], required=False)
    if size is None:
        return None
    types, model_type = cfg.doc.get("layer_types"), cfg.model_type
    if types is None and model_type in WINDOW_PATTERN_DEFAULTS:
        return {"size": size, "full_every": cfg.integer(WINDOW_PATTERN_KEYS.get(model_type, "sliding_window_pattern"),
                                                        required=False, default=WINDOW_PATTERN_DEFAULTS[model_type])}
    if types is None:
        return {"size": size, "full_every": 0} if model_type in WINDOW_EVERY_LAYER_MODEL_TYPES else None
    _check_window_layers(cfg, types)
    full = [i for i, kind in enumerate(types) if kind == "full_attention"]
    if len(full) == len(types):
        return None
    every = full[0] + 1 if full else 0
    if full != [i for i in range(len(types)) if every and (i + 1) % every == 0]:
        raise cfg.fail("layer_types", "full_attention layers that are not every N-th layer are not modelled (a "
                       "sliding window's full_every)")
    return {"size": size, "full_every": every}


CHUNKED_MODEL_TYPES = frozenset({"llama4", "llama4_text"})
"""model_type of the families whose attention is chunked in some layers where the file leaves layer_types to its
configuration class (Llama4TextConfig: attention_chunk_size, 8,192 by default)."""
LLAMA4_CHUNK, LLAMA4_NOPE_INTERVAL = 8192, 4
"""Llama4TextConfig's attention_chunk_size and no_rope_layer_interval defaults."""


def _chunked_attention(cfg: Reader) -> dict[str, Any] | None:
    """Llama 4's chunked attention as a chunked window (SlidingWindowSpec.chunked): attention_chunk_size tokens in
    the layers layer_types names chunked_attention, or, where the file leaves layer_types to Llama4TextConfig, those it
    fills so: the rotary layers no_rope_layers marks 1, else all but every no_rope_layer_interval-th (4), whose NoPE
    attention sees the whole context (Llama4TextAttention masks a chunked layer by chunks). Before this, the chunked
    layers read as full attention: the same up to a chunk's tokens, Llama 4 Scout's model FLOPs 39% over at 32,768."""
    types, family = cfg.doc.get("layer_types"), cfg.model_type in CHUNKED_MODEL_TYPES
    named = isinstance(types, list) and "chunked_attention" in types
    if not (named or family):
        return None
    size = cfg.integer("attention_chunk_size", required=not family, default=LLAMA4_CHUNK)
    layers = cfg.layers()
    if named:
        if len(types) != layers:
            raise cfg.fail("layer_types", f"has {len(types)} entries, but num_hidden_layers is {layers}: give one per "
                                          "layer")
        chunked = [kind == "chunked_attention" for kind in types]
        key = "layer_types"
    elif (rotary := _rotary_layers(cfg)) is not None:  # Llama4TextConfig's: its rotary layers are chunked
        chunked, key = rotary
    else:
        return None
    full = [i for i, kind in enumerate(chunked) if not kind]
    if len(full) == layers:
        return None
    every = full[0] + 1 if full else 0
    if full != [i for i in range(layers) if every and (i + 1) % every == 0]:
        raise cfg.fail(key, "full-attention layers that are not every N-th layer are not modelled beside chunked "
                            "attention (a chunked window's full_every)")
    return {"size": size, "full_every": every, "chunked": True}


def _rotary_layers(cfg: Reader) -> tuple[list[bool], str] | None:
    """Which layers rotate their queries and keys where the family leaves some without (NoPE layers), and the key that
    says so: no_rope_layers, 1 a rotary layer (Llama4TextConfig, SmolLM3Config; [] reads as unset), else all but every
    no_rope_layer_interval-th (4 by default, Llama4TextConfig's). None where neither is given and the family is no
    Llama 4 (CHUNKED_MODEL_TYPES), whose configuration class fills them in."""
    if cfg.doc.get("no_rope_layers"):
        return [bool(rope) for rope in _flags(cfg, "no_rope_layers", cfg.layers())], "no_rope_layers"
    if cfg.model_type in CHUNKED_MODEL_TYPES or "no_rope_layer_interval" in cfg.doc:
        interval = cfg.integer("no_rope_layer_interval", required=False, default=LLAMA4_NOPE_INTERVAL)
        return [(i + 1) % interval != 0 for i in range(cfg.layers())], "no_rope_layer_interval"
    return None


def _nope_every(cfg: Reader) -> int:
    """ModelSpec.nope_every: every such-numbered layer is a NoPE layer (_rotary_layers), 0 where every layer
    rotates; NoPE layers that are not every N-th layer are refused."""
    rotary = _rotary_layers(cfg)
    if rotary is None:
        return 0
    flags, key = rotary
    nope = [i for i, rotates in enumerate(flags) if not rotates]
    every = nope[0] + 1 if nope else 0
    if nope != [i for i in range(len(flags)) if every and (i + 1) % every == 0]:
        raise cfg.fail(key, "NoPE layers (no rotary embedding) that are not every N-th layer are not modelled "
                            "(nope_every)")
    return every


def _flags(cfg: Reader, key: str, layers: int) -> list[int]:
    """A key giving each layer 0 or 1 (Llama 4's no_rope_layers)."""
    flags = cfg.doc.get(key)
    if not isinstance(flags, list) or len(flags) != layers or any(flag not in (0, 1) or isinstance(flag, float)
                                                                   for flag in flags):
        raise cfg.fail(key, f"must give each of the {layers} layers 0 or 1, got {flags!r}")
    return flags


WINDOW_LAYER_TYPES = ("sliding_attention", "full_attention")
"""The layer_types a model with a sliding window is read with (GptOssConfig, Gemma2Config, Gemma3TextConfig,
Qwen2Config); another beside sliding_window is refused: Llama 4's chunked_attention (attention within fixed chunks of
attention_chunk_size, read by _chunked_attention, where the model has no sliding window) would otherwise drop the
window unsaid."""


def _check_window_layers(cfg: Reader, types: Any) -> None:
    """Refuses a layer_types beside sliding_window that is not one entry per layer (num_hidden_layers) of
    WINDOW_LAYER_TYPES (Qwen3-Next's linear attention is read by its own pattern, never here)."""
    layers = cfg.integer(*FIELD_KEYS["num_layers"])
    if not isinstance(types, list):
        raise cfg.fail("layer_types", f"must be a list of {', '.join(WINDOW_LAYER_TYPES)}, one per layer, got "
                                      f"{types!r}")
    if len(types) != layers:
        raise cfg.fail("layer_types", f"has {len(types)} entries, but num_hidden_layers is {layers}: give one per "
                                      "layer")
    other = next((i for i, kind in enumerate(types) if kind not in WINDOW_LAYER_TYPES), None)
    if other is not None:
        raise cfg.fail("layer_types", f"names {types[other]!r} (layer {other}) beside sliding_window: simulon models "
                                      f"layers of {' and '.join(WINDOW_LAYER_TYPES)} only")


ACTIVATION_KEYS = ("mlp_hidden_act", "hidden_activation", "hidden_act", "activation_function", "activation")
"""Where a config names its MLP's activation (NemotronH's, Gemma's, most families', GPT-2's, Falcon's), the first set
winning."""


def _activation(cfg: Reader) -> str:
    """The MLP's activation as the file names it (ACTIVATION_KEYS, the first one set), one that transformers knows,
    else its family's default (DEFAULT_ACTIVATIONS)."""
    key = next((k for k in ACTIVATION_KEYS if cfg.doc.get(k) is not None), None)
    if key is None:
        if cfg.model_type not in DEFAULT_ACTIVATIONS:
            family = f"model_type {cfg.model_type!r}" if cfg.model_type else "a file without model_type"
            raise cfg.fail("hidden_act", f"is missing, and {family} has no default simulon knows: give the MLP's "
                                         f"activation ('silu' for a gated SwiGLU MLP, 'gelu' for a plain one)")
        return DEFAULT_ACTIVATIONS[cfg.model_type]
    name = cfg.text(key, "")
    if name not in HF_ACTIVATIONS:
        raise cfg.fail(key, f"names no activation transformers has, got {name!r} (it has "
                            f"{', '.join(sorted(HF_ACTIVATIONS))})")
    return name


def _mlp(cfg: Reader) -> str:
    """simulon's activation for the file's MLP: gated wherever its family's MLP gates (GATED_MLP_MODEL_TYPES: GeGLU for
    a GELU, else SwiGLU), elsewhere as named (GATED_ACTIVATIONS)."""
    name = _activation(cfg)
    if cfg.model_type in GATED_MLP_MODEL_TYPES:
        return "geglu" if name in GELU_ACTIVATIONS else "swiglu"
    return GATED_ACTIVATIONS.get(name, "gelu")


DROPOUT_KEYS = ("resid_pdrop", "embd_pdrop", "attn_pdrop", "hidden_dropout", "attention_dropout", "dropout")
"""Where a config gives its hidden and attention dropout (GPT2Config's and GPTBigCodeConfig's *_pdrop, OPTConfig's
dropout, GPTNeoXConfig's, BloomConfig's and FalconConfig's hidden_dropout, attention_dropout in most families)."""


def _dropout(cfg: Reader) -> float:
    """The model's dropout (ModelSpec.dropout, one probability for the hidden and attention dropouts, any of which
    keeps masks for backward): the largest the file gives (DROPOUT_KEYS), 0 where it gives none."""
    largest = 0.0
    for key in DROPOUT_KEYS:
        value = cfg.doc.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_DROPOUT:
            raise cfg.fail(key, f"must be a probability from 0 to {MAX_DROPOUT}, got {value!r}")
        largest = max(largest, float(value))
    return largest


LEARNED_POSITION_MODEL_TYPES = frozenset({"gpt2", "openai-gpt", "gpt_neo", "gpt_bigcode", "opt", "biogpt"})
"""model_type of the families that add learned absolute positions to the embedding (GPT2Model's wpe, OPT's
OPTLearnedPositionalEmbedding, ...) rather than rotate queries and keys."""
NO_POSITION_MODEL_TYPES = frozenset({"nemotron_h"})
"""model_type of the families whose attention sees no positions at all (NemotronHAttention has no rotary embedding;
Megatron-LM's examples/mamba/train.sh: --position-embedding-type none)."""


def _position_embedding(cfg: Reader) -> str:
    """The model's position embedding (ModelSpec.position_embedding): ALiBi where BLOOM always has it and where
    Falcon's `alibi` or MPT's attn_config.alibi says so (MPT without it learns its positions, learned_pos_emb), learned
    or none by family (LEARNED_POSITION_MODEL_TYPES, NO_POSITION_MODEL_TYPES), else rotary, what the other families
    read here apply (LlamaRotaryEmbedding and its kin)."""
    attn_config = cfg.doc.get("attn_config")
    if cfg.model_type == "bloom" or (cfg.model_type == "falcon" and cfg.doc.get("alibi") is True):
        return "alibi"
    if cfg.model_type == "mpt":
        return "alibi" if isinstance(attn_config, dict) and attn_config.get("alibi") is True else "learned"
    if cfg.model_type in LEARNED_POSITION_MODEL_TYPES:
        return "learned"
    return "none" if cfg.model_type in NO_POSITION_MODEL_TYPES else "rope"


MULTI_QUERY_MODEL_TYPES = frozenset({"gpt_bigcode", "falcon"})
"""model_type of the families whose attention shares one key-value head among the queries where multi_query is true
or absent (GPTBigCodeConfig's and FalconConfig's multi_query=True: StarCoder, SantaCoder, Falcon-7B),
num_key_value_heads unwritten; Falcon's new_decoder_architecture (Falcon-40B, -180B) takes num_kv_heads whatever
multi_query says (FalconAttention: `config.num_kv_heads if (new_decoder_architecture or not multi_query) else 1`)."""


def _kv_heads(cfg: Reader, heads: int) -> int:
    """Key-value heads: one under multi-query attention (MULTI_QUERY_MODEL_TYPES), else num_key_value_heads (Falcon's
    num_kv_heads), else one per query head."""
    if (cfg.model_type in MULTI_QUERY_MODEL_TYPES and cfg.flag("multi_query", True)
            and not cfg.flag("new_decoder_architecture", False)):
        return 1
    return cfg.integer(*FIELD_KEYS["num_kv_heads"], required=False, default=heads)


def _head_dim(cfg: Reader) -> int | None:
    """The attention's head size where the file gives one; refused where its full-attention layers have another
    (Gemma 4's global_head_dim), which simulon's layers, all alike in head size, do not model."""
    head_dim = cfg.integer(*FIELD_KEYS["head_dim"], required=False)
    other = cfg.integer("global_head_dim", required=False)
    if other is not None and other != head_dim:
        others = head_dim if head_dim is not None else "hidden_size / num_attention_heads"
        raise cfg.fail("global_head_dim", f"gives the full-attention layers a head size of {other} beside the "
                                          f"others' {others}: layers of two head sizes are not modelled")
    return head_dim


UNREAD_KEYS = {
    "moe_num_experts": "names experts under a key this reader does not take (ERNIE 4.5's, Step-3's; it reads "
                       "num_local_experts, num_experts or n_routed_experts): give the model block's moe yourself",
    "attn_layer_period": "lays out attention among Mamba layers (Jamba's), which this reader does not take: give "
                         "the model block's hybrid_pattern yourself",
    "expert_layer_period": "lays out experts among the layers (Jamba's), which this reader does not take: give the "
                           "model block's moe yourself",
    "linear_attn_config": "lays out Kimi Delta Attention layers among the attention ones (Kimi Linear's kda_layers), "
                          f"a linear attention{UNMODELLED}: write the model block yourself",
    "cross_attention_layers": "names layers that cross-attend to the image encoder's states (Llama 3.2 Vision's, "
                              "MllamaTextConfig's), which simulon's decoder, self-attention alone, does not model: "
                              "write the model block yourself",
    "moe_latent_size": "runs the experts in a latent space that wide (Nemotron 3 Super's LatentMoE: each token "
                       "projected down before its dispatch and up after its combine), which simulon does not model: "
                       "read as experts of hidden_size, their weights and FLOPs would be hidden_size / moe_latent_size "
                       "times over; write the model block yourself",
    "is_encoder_decoder": "says the model is an encoder-decoder: simulon models one decoder stack, without "
                          "cross-attention: write the model block yourself",
}
"""Keys that describe a model in a way the reader does not take: refused, rather than the model read without them
(as a dense or all-attention model)."""


def _refuse_unread(cfg: Reader) -> None:
    if cfg.model_type in UNREAD_MODEL_TYPES:
        raise cfg.fail("model_type", f"is {cfg.model_type!r}, {UNREAD_MODEL_TYPES[cfg.model_type]}")
    for key, problem in UNREAD_KEYS.items():
        if cfg.doc.get(key) not in (None, False, [], {}):
            raise cfg.fail(key, problem)
    _refuse_unread_layers(cfg)
    _refuse_mixers_without_layout(cfg)


READ_LAYER_TYPES = frozenset({*WINDOW_LAYER_TYPES, *LINEAR_ATTENTION, "chunked_attention"})
"""The layer_types this reader takes: attention over the whole context or a sliding window, Qwen3-Next's and Qwen3.5's
gated delta nets (linear_attention), Llama 4's chunked attention (_chunked_attention)."""
LIGHTNING_ATTENTION = ("MiniMax's lightning attention (MiniMax-Text-01's and MiniMax-M1's linear attention, seven "
                       f"layers in eight){UNMODELLED}: write the model block yourself")
"""Why MiniMax's linear-attention layers are no layers simulon models (its gated delta net is another mixer)."""
LINEAR_GROUPS = ("lays out linear-attention layers among the softmax ones: in each group of layer_group_size layers "
                 "all but the last are Lightning Attention or Kimi Delta Attention (Ling's and Ring's linear models, "
                 f"BailingMoeLinearConfig; layer i softmax where (i + 1) % layer_group_size == 0){UNMODELLED}: write "
                 "the model block yourself")
"""Why a Ling or Ring linear model's layers are not read: its linear attention is no mixer simulon models."""


def _refuse_unread_layers(cfg: Reader) -> None:
    """A file whose layers are not all layers this reader takes, refused rather than read as attention layers:
    layer_types naming another kind (LFM2's conv, Granite 4.0-H's mamba), MiniMax's lightning attention (its
    transformers MiniMaxConfig's linear_attention, its own code's attn_type_list 0) or Ling's and Ring's linear
    attention (layer_group_size). An entry that is no name is left
    to the checks of the layer list that reads it (_check_window_layers, _linear_attention_pattern)."""
    types = cfg.doc.get("layer_types")
    if isinstance(types, list) and cfg.model_type != "nemotron_h":  # NemotronH's are its block names (BLOCK_TYPES)
        other = next((i for i, kind in enumerate(types) if (isinstance(kind, str) and kind not in READ_LAYER_TYPES)
                      or (kind == "linear_attention" and cfg.model_type == "minimax")), None)
        if other is not None and types[other] == "linear_attention":
            raise cfg.fail("layer_types", f"names 'linear_attention' layers (layer {other}): {LIGHTNING_ATTENTION}")
        if other is not None:
            raise cfg.fail("layer_types", f"names {types[other]!r} layers (layer {other}), which this reader does not "
                                          f"take (it reads {', '.join(sorted(READ_LAYER_TYPES))}): write the model "
                                          "block yourself (a hybrid's layers as hybrid_pattern)")
    kinds = cfg.doc.get("attn_type_list")
    if isinstance(kinds, list) and 0 in kinds:
        raise cfg.fail("attn_type_list", f"marks layer {kinds.index(0)} 0: {LIGHTNING_ATTENTION}")
    if cfg.doc.get("layer_group_size") not in (None, 1):  # a group of one layer: every layer softmax attention
        raise cfg.fail("layer_group_size", f"is {cfg.doc['layer_group_size']!r}: it {LINEAR_GROUPS}")


def _refuse_mixers_without_layout(cfg: Reader) -> None:
    """A file that sizes a state-space mixer (SSM_KEYS) but says which layers hold one under no key this reader takes
    (FIELD_KEYS' hybrid_pattern keys): a family not known here (Bamba, Falcon-H1), refused rather than read as a
    transformer."""
    if any(cfg.doc.get(key) is not None for key in FIELD_KEYS["hybrid_pattern"]):
        return
    key = next((key for key in SSM_KEYS if cfg.doc.get(key) is not None), None)
    if key is not None:
        raise cfg.fail(key, f"sizes a state-space (Mamba) mixer, but the file ({cfg.model_type or 'no model_type'}) "
                       "lays out its layers under no key this reader takes "
                       f"({', '.join(FIELD_KEYS['hybrid_pattern'])}): write its model block yourself (a hybrid's "
                       "layers as hybrid_pattern, a Mamba-2 mixer as mamba)")


def model_from_hf(path: Path) -> dict[str, Any]:
    """The model block a HuggingFace config.json describes. Raises HFConfigError naming file and key."""
    return _model_block(Reader(path, read_config(path)))


def _model_block(cfg: Reader) -> dict[str, Any]:
    path = cfg.path
    _refuse_unread(cfg)
    heads = cfg.integer(*FIELD_KEYS["num_heads"])
    block: dict[str, Any] = {
        # the file in the name keeps a shipped template of the same name from filling in keys (config/templates.py)
        "name": f"{cfg.text('_name_or_path', '') or path.parent.name or 'model'} ({path.name})",
        "num_layers": cfg.integer(*FIELD_KEYS["num_layers"]),
        "hidden_size": cfg.integer(*FIELD_KEYS["hidden_size"]),
        "num_heads": heads,
        "num_kv_heads": _kv_heads(cfg, heads),
        # Llama 4's dense layers are intermediate_size_mlp wide, its experts intermediate_size (intermediate_size
        # the key a file without either is told it misses)
        "ffn_hidden_size": cfg.integer(FIELD_KEYS["ffn_hidden_size"][0], required=False)
        or cfg.integer(*FIELD_KEYS["ffn_hidden_size"][1:], required=cfg.model_type not in FOUR_X_MLP_MODEL_TYPES)
        or 4 * cfg.integer(*FIELD_KEYS["hidden_size"]),
        "vocab_size": cfg.integer(*FIELD_KEYS["vocab_size"]),
        "activation": _mlp(cfg),
        "normalization": "rmsnorm" if "rms_norm_eps" in cfg.doc or cfg.model_type in RMSNORM_MODEL_TYPES
        else "layernorm",
        "tie_embeddings": cfg.flag(*FIELD_KEYS["tie_embeddings"], cfg.model_type in TIED_MODEL_TYPES),
    }
    dropout = _dropout(cfg)
    if dropout:
        block["dropout"] = dropout
    block["position_embedding"] = _position_embedding(cfg)
    if block["position_embedding"] == "rope" and (nope := _nope_every(cfg)):
        block["nope_every"] = nope
    head_dim = _head_dim(cfg)
    if head_dim is not None and "kv_lora_rank" not in cfg.doc:  # MLA's head_dim is its rotary slice (GlmMoeDsaConfig)
        block["head_dim"] = head_dim
    pattern = _hybrid_pattern(cfg)
    # NemotronHConfig writes its MoE and Mamba defaults into every config.json: a block only where a layer has it
    moe = _moe(cfg) if pattern is None or "E" in pattern else None
    mamba = _mamba(cfg) if pattern is not None and "M" in pattern else None
    gdn = _gated_delta_net(cfg)
    if gdn is not None:  # Qwen3-Next, Qwen3.5: gated attention every few layers, gated delta nets between
        # the pattern says which layers hold experts, so the MoE block keeps no layer layout of its own
        pattern = _linear_attention_pattern(cfg, None if moe is None else moe.pop("layer_freq", 1))
        block["num_layers"] = len(split_mtp(pattern)[0])
        block["attention_output_gate"] = cfg.flag(*FIELD_KEYS["attention_output_gate"], True)
        if moe is not None and "E" not in pattern:
            moe = None
    window = _sliding_window(cfg) if gdn is None else None
    chunked = _chunked_attention(cfg) if gdn is None else None
    if window is not None and chunked is not None:
        raise cfg.fail("attention_chunk_size", "beside sliding_window: layers of a sliding window and layers of "
                                               "chunked attention in one model are not modelled")
    window = window or chunked
    for key, sub in (("moe", moe), ("mla", _mla(cfg)), ("mamba", mamba), ("gdn", gdn), ("hybrid_pattern", pattern),
                     ("sliding_window", window)):
        if sub is not None:
            block[key] = sub
    mtp = _mtp_depths(cfg)
    if mtp:
        block["mtp_layers"] = mtp
    return block


@dataclass(frozen=True)
class FromHF:
    """A model block read from a HuggingFace config: what the file gives (`block`), the keys written beside
    `from_hf` (`overrides`, winning), and the file's reader, to name its keys in errors (file_error)."""

    cfg: Reader
    block: dict[str, Any]
    overrides: dict[str, Any]

    @property
    def merged(self) -> dict[str, Any]:
        """The overrides written over the file's block key by key, a sub-block too (`moe: {top_k: 4}` changes the
        top-k alone), as keys beside `from` override a template (templates.merged)."""
        return merged(self.block, self.overrides)


def resolve_from_hf(data: dict[str, Any], base_dir: Path | None) -> FromHF:
    """A model block with `from_hf` replaced by what the file gives, the block's own keys winning."""
    ref = data["from_hf"]
    if not isinstance(ref, str) or not ref:
        raise HFConfigError(f"'from_hf' must be the path of a HuggingFace config.json, got {ref!r}")
    if "from" in data:
        raise HFConfigError(f"give one of 'from' (a template, here {data['from']!r}) and 'from_hf' (a HuggingFace "
                            f"config, here {ref!r}), not both")
    path = scenario_path(ref, base_dir)
    if os.path.isdir(path):  # a checkpoint's folder, as HuggingFace's from_pretrained takes it (os.path's: False,
        path = path / "config.json"  # not OSError, for a name too long for a file, which read_config then names)
    elif not os.path.exists(path) and HUB_ID.fullmatch(ref) and not ref.lower().endswith(".json"):
        raise HFConfigError(f"cannot read HuggingFace config {str(path)!r}: no such file; {_hub_hint(ref)}")
    cfg = Reader(path, read_config(path))
    return FromHF(cfg, _model_block(cfg), {k: v for k, v in data.items() if k != "from_hf"})


def _hub_hint(ref: str) -> str:
    """What to do with a HuggingFace Hub id given as from_hf: `from:` it where it names a shipped template loosely
    (template_stem_loose), else download its config.json (simulon reads nothing from the network)."""
    try:
        stem = template_stem_loose("model", ref)
    except AmbiguousTemplate:
        stem = None
    if stem is not None:
        return f"a model on the HuggingFace Hub is named with `from: {ref}` (the shipped template {stem})"
    return (f"no shipped template is {ref!r}, and simulon reads nothing from the HuggingFace Hub: download the "
            "model's config.json and give its path")


_FIELD_NAME = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
"""A field's name as the model block's messages write it (num_layers, top_k): snake case, one underscore at least."""


def file_error(read: FromHF, error: dict[str, Any]) -> HFConfigError | None:
    """The model block's first validation error (one of pydantic's error dicts, for the block `read.merged`) as an
    error naming the file and its keys (FIELD_KEYS), where it is a check of the model block (a top-k above the
    experts, a first_k_dense_replace above the layers, key-value heads that do not divide the heads) or a field's
    own bound on fields the file alone set; None where a field the scenario sets beside `from_hf` is in it (the
    scenario's validation names that field) or no key of the file gives the field."""
    cfg, block, overrides = read.cfg, read.block, read.overrides
    loc = tuple(str(part) for part in error["loc"])
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):  # a check of the block at loc, naming its fields relative to it
        scope, field, message = loc, ".".join((*loc, cause.field)), cause.message
    elif error["type"] == "value_error":  # one field's own bound (num_layers above 10,000)
        field = next((".".join(loc[:n]) for n in range(len(loc), 0, -1) if ".".join(loc[:n]) in FIELD_KEYS), None)
        if field is None:
            return None
        scope, message = tuple(field.split(".")[:-1]), str(error["msg"]).removeprefix("Value error, ")
    else:
        return None
    key = _file_key(cfg, block, overrides, field)
    if key is None:
        return None
    named: dict[str, str] = {}
    for name in dict.fromkeys(_FIELD_NAME.findall(message)):
        # a field of the checked block, or of the block the problem is in (ModelSpec's "moe: ... first_dense_layers")
        dotted = next((d for d in (".".join((*scope, name)), f"{field}.{name}") if d in FIELD_KEYS), None)
        if dotted is None:
            continue
        if dotted.split(".")[0] in overrides:  # a field the scenario sets: the problem is named there
            return None
        # a field the file leaves to its default under the key it would set
        named[name] = _file_key(cfg, block, overrides, dotted) or FIELD_KEYS[dotted][0]
    message = _FIELD_NAME.sub(lambda match: named.get(match.group(0), match.group(0)), message)
    return HFConfigError(f"HuggingFace config {str(cfg.path)!r}: key {key!r}: {message}")


def _file_key(cfg: Reader, block: dict[str, Any], overrides: dict[str, Any], field: str) -> str | None:
    """The config key the file gives `field` (dotted below the model block) under, the first of FIELD_KEYS set; None
    where the scenario sets it beside `from_hf`, or the file leaves it to its default."""
    parts = field.split(".")
    if parts[0] in overrides:
        return None
    node: Any = block
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return next((key for key in FIELD_KEYS.get(field, ()) if cfg.doc.get(key) is not None), None)

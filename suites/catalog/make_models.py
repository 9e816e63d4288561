#!/usr/bin/env python3
"""Writes suites/catalog/models.json, the built-in `models` profile: the layer shapes of real
networks, each config naming the network, layer and batch it comes from (`model`), in f32 and
bf16. Run it after changing the shapes below; the JSON is what d9m embeds and reads (`make_models.py
OUT` writes OUT instead: ctest `catalog.models_generated` checks the committed file is its output).

Sources (NHWC, TensorFlow semantics, as the ops in d9m are defined):
- ResNet-50 v1 as Keras Applications builds it (He et al. 2016; keras.applications.ResNet50):
  ZeroPadding2D(3) + 7x7/2 VALID conv, ZeroPadding2D(1) + 3x3/2 max-pool, and bottleneck blocks
  whose first 1x1 conv (and the shortcut) carry the stride; every conv has a bias. Batch 32:
  every distinct conv, max-pool and bias shape, and fc1000 (its forward and both gradients).
  Not here: avg_pool (GlobalAveragePooling2D, a reduce_mean whose gradient is a broadcast; d9m has
  no TensorFlow op for it) and the BatchNormalization layers.
- U-Net (Ronneberger et al. 2015) on 256x256 inputs with UpSampling2D in the decoder, batch 8:
  the four 2x up-samplings, bilinear (tf.image.resize: half-pixel centres) and nearest (the
  Keras default), and one with TF1's align_corners.
- Mask R-CNN with an FPN (He et al. 2017; TensorFlow implementations do ROIAlign with
  tf.image.crop_and_resize), batch 2: the box head's 7x7 crops of the 512 sampled regions per
  image (section 3.1: N = 512 with FPN), 1024 in all, and the mask head's 14x14 crops of the
  positive ones (at most a quarter: the sampling's 1:3 ratio), 256 in all, from P2 (256x256x256
  for a 1024x1024 image) and P4 (64x64x256), each on one level (an upper bound: FPN assigns each
  region one level). The image gradient only: Mask R-CNN stops the gradient to the boxes
  (matterport's PyramidROIAlign: tf.stop_gradient), so crop_and_resize_grad_boxes is not here.
- BERT-base (Devlin et al. 2019): hidden 768, 12 heads, FFN 3072, vocabulary 30522, sequence
  512, batch 8 (4096 tokens): the projections and their weight and input gradients (large K =
  tokens: where libraries choose split-K), the masked-LM head on 76 predictions per sequence
  against the tied word embeddings (run_pretraining.py: transpose_b) and its two gradients,
  attention at sequence 512, the word-embedding gradient (TF's unsorted_segment_sum, and
  PyTorch's as bags of one index) with token ids by Zipf's law, and the bias gradients.
- ViT-B/16 (Dosovitskiy et al. 2021): 224x224 images, 16x16 patches (196 + 1 tokens), hidden
  768, 12 heads, MLP 3072, batch 32 (6304 tokens): the patch embedding conv and its weight
  gradient, the four projections and the head (forward), the MLP up weight gradient,
  attention at sequence 197 and the pre-norm's gamma gradient.
"""
import json
import os
import sys

F32_BF16 = ["f32", "bf16"]
configs = []


def add(op, name, params, model, dtypes=F32_BF16, **extra):
    for i, dtype in enumerate(dtypes):
        c = {"op": op, "name": name if dtype == "f32" else f"{name}_{dtype}", "params": params, "model": model}
        if dtype != "f32":
            c["dtype"] = dtype
        c.update(extra)
        configs.append(c)


# ---- ResNet-50 at batch 32 ------------------------------------------------------------------
N = 32
# (layer, input h = w, ci, co, kernel, stride, padding)
RESNET_CONVS = [
    ("conv1", 230, 3, 64, 7, 2, "VALID"),
    ("res2a_branch2a", 56, 64, 64, 1, 1, "VALID"),
    ("res2a_branch2b", 56, 64, 64, 3, 1, "SAME"),
    ("res2a_branch2c", 56, 64, 256, 1, 1, "VALID"),  # and the shortcut res2a_branch1
    ("res2b_branch2a", 56, 256, 64, 1, 1, "VALID"),
    ("res3a_branch2a", 56, 256, 128, 1, 2, "VALID"),
    ("res3a_branch1", 56, 256, 512, 1, 2, "VALID"),
    ("res3a_branch2b", 28, 128, 128, 3, 1, "SAME"),
    ("res3a_branch2c", 28, 128, 512, 1, 1, "VALID"),
    ("res3b_branch2a", 28, 512, 128, 1, 1, "VALID"),
    ("res4a_branch2a", 28, 512, 256, 1, 2, "VALID"),
    ("res4a_branch1", 28, 512, 1024, 1, 2, "VALID"),
    ("res4a_branch2b", 14, 256, 256, 3, 1, "SAME"),
    ("res4a_branch2c", 14, 256, 1024, 1, 1, "VALID"),
    ("res4b_branch2a", 14, 1024, 256, 1, 1, "VALID"),
    ("res5a_branch2a", 14, 1024, 512, 1, 2, "VALID"),
    ("res5a_branch1", 14, 1024, 2048, 1, 2, "VALID"),
    ("res5a_branch2b", 7, 512, 512, 3, 1, "SAME"),
    ("res5a_branch2c", 7, 512, 2048, 1, 1, "VALID"),
    ("res5b_branch2a", 7, 2048, 512, 1, 1, "VALID"),
]
# The graph API's engines are left to the default profile's two configs (they multiply the
# cases by 64); the legacy algorithms and the autotuner run on every shape.
CONV_VARIANTS = ["cpu.*", "cuda.*", "cudnn.algo*", "cudnn.autotune"]
# The backprops' ordered variant on the CPU is the gather (each output sums its own contributions,
# memory of the output): the bucketed cpu.ordered replays billions of buffered contributions here
# (100 s a trial on ResNet's res5a_branch2b, against 7 s for the gather) and is certified by the
# default profile. The GPU's sorting cuda.ordered stays: at these sizes it runs in many waves.
# PyTorch's own backprops (torch.default, torch.deterministic) run at every layer: these are the
# shapes its users train at.
BACKPROP_VARIANTS = ["cpu.serial", "cpu.atomic", "cpu.gather", "cuda.*", "cudnn.*", "torch.*"]
for layer, hw, ci, co, k, s, pad in RESNET_CONVS:
    p = {"n": N, "h": hw, "w": hw, "ci": ci, "co": co, "kh": k, "kw": k, "stride_h": s, "stride_w": s, "padding": pad}
    model = f"ResNet-50 {layer} ({k}x{k}/{s}, {hw}x{hw}x{ci} -> {co}), batch {N}"
    add("conv2d", f"resnet50_{layer}", p, model, variants=CONV_VARIANTS)
    if layer != "conv1":  # the input image needs no gradient
        add("conv2d_bwd_data", f"resnet50_{layer}", p, model, variants=BACKPROP_VARIANTS)
    add("conv2d_bwd_filter", f"resnet50_{layer}", p, model, variants=BACKPROP_VARIANTS)
add("maxpool2d_bwd", "resnet50_pool1",
    {"n": N, "h": 114, "w": 114, "c": 64, "ksize_h": 3, "ksize_w": 3, "stride_h": 2, "stride_w": 2, "padding": "VALID"},
    f"ResNet-50 pool1 (3x3/2 after ZeroPadding2D(1), 114x114x64), batch {N}")
for hw, c in [(112, 64), (56, 64), (56, 256), (28, 128), (28, 512), (14, 256), (14, 1024), (7, 512), (7, 2048), (1, 1000)]:
    what = "fc1000" if hw == 1 else f"conv biases {hw}x{hw}x{c}"
    add("bias_add_grad", f"resnet50_bias_{hw}x{hw}x{c}", {"n": N, "h": hw, "w": hw, "c": c}, f"ResNet-50 {what}, batch {N}")
add("matmul", "resnet50_fc1000", {"m": N, "n": 1000, "k": 2048}, f"ResNet-50 fc1000 forward, batch {N}")
add("matmul", "resnet50_fc1000_weight_grad", {"m": 2048, "n": 1000, "k": N, "layout": "TN"}, f"ResNet-50 fc1000 weight gradient, batch {N}")
add("matmul", "resnet50_fc1000_input_grad", {"m": N, "n": 2048, "k": 1000, "layout": "NT"}, f"ResNet-50 fc1000 input gradient, batch {N}")
add("softmax_cross_entropy", "resnet50_imagenet_loss", {"n": N, "classes": 1000}, f"ResNet-50 and ViT-B/16 ImageNet loss (1000 classes, mean), batch {N}")

# ---- U-Net on 256x256 at batch 8 ------------------------------------------------------------
UN = 8
for small, c in [(16, 1024), (32, 512), (64, 256), (128, 128)]:
    p = {"n": UN, "h": small, "w": small, "c": c, "out_h": 2 * small, "out_w": 2 * small}
    model = f"U-Net decoder up-sampling {small}x{small}x{c} -> {2 * small}x{2 * small}, batch {UN}"
    add("resize_bilinear_grad", f"unet_up_{small}x{small}x{c}", p, model + " (bilinear, half-pixel centres)")
    add("resize_nearest_grad", f"unet_up_{small}x{small}x{c}", p, model + " (UpSampling2D nearest)")
add("resize_bilinear_grad", "unet_up_64x64x256_align_corners",
    {"n": UN, "h": 64, "w": 64, "c": 256, "out_h": 128, "out_w": 128, "align_corners": True, "half_pixel_centers": False},
    f"U-Net decoder up-sampling 64x64x256 -> 128x128 with TF1's align_corners, batch {UN}")

# ---- Mask R-CNN ROIAlign, batch 2 -------------------------------------------------------
for level, hw in [("P2", 256), ("P4", 64)]:
    for crop, head, boxes, which in [(7, "box head", 1024, "512 sampled per image"), (14, "mask head", 256, "the positive quarter of 512 per image")]:
        p = {"batch": 2, "h": hw, "w": hw, "c": 256, "boxes": boxes, "crop_h": crop, "crop_w": crop}
        model = f"Mask R-CNN ROIAlign {head}: {boxes} regions ({which}), {crop}x{crop} crops of FPN {level} ({hw}x{hw}x256), batch 2"
        name = f"maskrcnn_{level.lower()}_{crop}x{crop}"
        add("crop_and_resize", name, p, model)
        add("crop_and_resize_grad_image", name, p, model)

# ---- BERT-base: sequence 512, batch 8 ------------------------------------------------------
T, H, FF, V = 8 * 512, 768, 3072, 30522
BERT = "BERT-base (sequence 512, batch 8)"
for name, m, n, k, layout, what in [
    # Q, K and V as one GEMM, as NVIDIA's and Megatron's BERT run them; Google's and Hugging Face's
    # run three 768x768 GEMMs, the attention output's shape below.
    ("bert_qkv", T, 3 * H, H, "NN", "Q, K and V projections as one GEMM (NVIDIA's fused QKV)"),
    ("bert_qkv_weight_grad", H, 3 * H, T, "TN", "fused QKV weight gradient (K = tokens)"),
    ("bert_qkv_input_grad", T, H, 3 * H, "NT", "fused QKV input gradient"),
    ("bert_attn_out_weight_grad", H, H, T, "TN", "attention output (and unfused Q, K, V) weight gradient (K = tokens)"),
    ("bert_attn_out_input_grad", T, H, H, "NT", "attention output (and unfused Q, K, V) input gradient"),
    ("bert_ffn_up_input_grad", T, H, FF, "NT", "FFN up input gradient"),
    ("bert_attn_out", T, H, H, "NN", "attention output projection"),
    ("bert_ffn_up", T, FF, H, "NN", "FFN up projection"),
    ("bert_ffn_down", T, H, FF, "NN", "FFN down projection"),
    ("bert_ffn_up_weight_grad", H, FF, T, "TN", "FFN up weight gradient (K = tokens)"),
    ("bert_ffn_down_weight_grad", FF, H, T, "TN", "FFN down weight gradient (K = tokens)"),
    ("bert_ffn_down_input_grad", T, FF, H, "NT", "FFN down input gradient"),
    ("bert_mlm_head", 8 * 76, V, H, "NT", "masked-LM head on 76 predictions per sequence (tied word embeddings, transpose_b)"),
    ("bert_mlm_head_weight_grad", V, H, 8 * 76, "TN", "masked-LM head gradient of the tied word embeddings"),
    ("bert_mlm_head_input_grad", 8 * 76, H, V, "NN", "masked-LM head input gradient (K = vocabulary)"),
]:
    add("matmul", name, {"m": m, "n": n, "k": k, "layout": layout}, f"{BERT} {what}")
attn = {"batch": 8, "heads": 12, "seq_q": 512, "seq_kv": 512, "head_dim": 64}
add("sdpa", "bert_attention", attn, f"{BERT} self-attention, 12 heads of 64")
add("sdpa_bwd", "bert_attention", attn, f"{BERT} self-attention backward, 12 heads of 64")
# Token ids by Zipf's law (kernels/common/fill.h), as word pieces are distributed: the frequent
# ones take hundreds of a batch's 4096 tokens, where uniform ids would put at most a few on any
# row, and two adds in either order give the same bits. Pre-training packs every sequence to 512
# tokens, so there is no padding (nn.Embedding's padding_idx 0 would drop the most frequent id).
add("unsorted_segment_sum", "bert_word_embedding_grad", {"rows": T, "depth": H, "num_segments": V, "ids": "zipf"},
    f"{BERT} word-embedding gradient as TensorFlow computes it: 4096 token rows into 30522 embeddings, ids by Zipf's law")
add("embedding_bag_bwd", "bert_word_embedding_grad", {"num_embeddings": V, "dim": H, "indices": T, "bags": T, "bag_size": 1, "ids": "zipf"},
    f"{BERT} word-embedding gradient as PyTorch computes it (bags of one index: nn.Embedding's backward), ids by Zipf's law")
add("softmax_cross_entropy", "bert_mlm_loss", {"n": 8 * 76, "classes": V},
    f"{BERT} masked-LM loss over 30522 classes, 76 predictions per sequence (mean)")
add("bias_add_grad", "bert_bias_768", {"n": 8, "h": 512, "w": 1, "c": H}, f"{BERT} bias gradient of a 768-wide projection")
add("bias_add_grad", "bert_bias_2304", {"n": 8, "h": 512, "w": 1, "c": 3 * H}, f"{BERT} bias gradient of the fused QKV projection")
add("bias_add_grad", "bert_bias_3072", {"n": 8, "h": 512, "w": 1, "c": FF}, f"{BERT} bias gradient of the FFN up projection")
ln = {"rows": T, "dim": H, "epsilon": 1e-12}  # BERT's LayerNorm epsilon (HF BertConfig.layer_norm_eps)
add("layer_norm", "bert_layer_norm", ln, f"{BERT} layer norm over the hidden 768 (after attention and after the FFN)")
add("layer_norm_grad_input", "bert_layer_norm", ln, f"{BERT} layer norm input gradient")
add("layer_norm_grad_gamma", "bert_layer_norm", ln, f"{BERT} layer norm gamma gradient (a sum over 4096 tokens)")
add("layer_norm_grad_beta", "bert_layer_norm", {"rows": T, "dim": H}, f"{BERT} layer norm beta gradient (a sum over 4096 tokens)")

# ---- ViT-B/16: 224x224, batch 32 -------------------------------------------------------------
VT = 32 * 197
VIT = "ViT-B/16 (224x224, batch 32)"
patch = {"n": 32, "h": 224, "w": 224, "ci": 3, "co": H, "kh": 16, "kw": 16, "stride_h": 16, "stride_w": 16, "padding": "VALID"}
add("conv2d", "vit_b16_patch_embedding", patch, f"{VIT} patch embedding (16x16/16 conv, 3 -> 768)", variants=CONV_VARIANTS)
add("conv2d_bwd_filter", "vit_b16_patch_embedding", patch, f"{VIT} patch embedding weight gradient")
for name, m, n, k, layout, what in [
    ("vit_b16_qkv", VT, 3 * H, H, "NN", "fused QKV projection"),
    ("vit_b16_attn_out", VT, H, H, "NN", "attention output projection"),
    ("vit_b16_mlp_up", VT, FF, H, "NN", "MLP up projection"),
    ("vit_b16_mlp_down", VT, H, FF, "NN", "MLP down projection"),
    ("vit_b16_head", 32, 1000, H, "NN", "ImageNet classifier head on the class token"),
    ("vit_b16_mlp_up_weight_grad", H, FF, VT, "TN", "MLP up weight gradient (K = tokens)"),
]:
    add("matmul", name, {"m": m, "n": n, "k": k, "layout": layout}, f"{VIT} {what}")
vit_attn = {"batch": 32, "heads": 12, "seq_q": 197, "seq_kv": 197, "head_dim": 64}
add("sdpa", "vit_b16_attention", vit_attn, f"{VIT} self-attention, 197 tokens, 12 heads of 64")
add("sdpa_bwd", "vit_b16_attention", vit_attn, f"{VIT} self-attention backward, 197 tokens, 12 heads of 64")
add("layer_norm_grad_gamma", "vit_b16_layer_norm", {"rows": VT, "dim": H, "epsilon": 1e-6}, f"{VIT} pre-norm gamma gradient (a sum over 6304 tokens)")

catalog = {
    "schema": "d9m.catalog/1",
    "description": "d9m's models profile (d9m run --profile models): the layer shapes of real networks at the batch "
                   "sizes they train at, each config naming its source in `model`, in f32 and bf16. Generated by "
                   "suites/catalog/make_models.py. Large: a CPU audit of it takes hours; ordered variants whose "
                   "buffers would not fit the machine report UNSUPPORTED with the memory they need.",
    "configs": configs,
}
# The committed file by default; another path (a test compares what this writes with the committed one).
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "models.json")
with open(out, "w") as f:
    f.write("{\n")
    f.write(f'  "schema": {json.dumps(catalog["schema"])},\n')
    f.write(f'  "description": {json.dumps(catalog["description"])},\n')
    f.write('  "configs": [\n')
    f.write(",\n".join("    " + json.dumps(c) for c in configs))
    f.write("\n  ]\n}\n")
print(f"{out}: {len(configs)} configs")

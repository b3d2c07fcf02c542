"""Programs written against the Hugging Face libraries, run unmodified on one device.

Each program builds a tiny randomly initialised model (nothing is downloaded), runs what a
user of that library runs, and returns plain numbers, so the same program on musa can be
compared with a reference device (the CPU on the host driver, native CUDA on a GPU):

    python3 -m tests.integrations.hf_programs --device cuda [--programs trainer,generate]

prints one JSON object {program: result}. Native CUDA runs in its own process with torch_musa
hidden (``--hide-torch-musa``; pytorch/pytorch#161129).
"""
import argparse
import json
import os
import sys
import tempfile


def _hide_torch_musa():
    """Native CUDA's side: accelerate and transformers import torch_musa whenever they can find it,
    and a registered PrivateUse1 backend breaks native CUDA backward (pytorch/pytorch#161129)."""
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    sys.path[:] = [p for p in sys.path if not os.path.isdir(os.path.join(p or ".", "torch_musa"))]
    sys.meta_path[:] = [f for f in sys.meta_path if "torch_musa" not in repr(getattr(f, "__dict__", ""))
                        and "editable" not in type(f).__module__.lower()]


if __name__ == "__main__" and "--hide-torch-musa" in sys.argv:
    _hide_torch_musa()

import torch  # noqa: E402

_VOCAB = [f"w{i}" for i in range(60)]


def _tiny_llama(device, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(_VOCAB) + 4, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(config).to(device).eval()


def _tokens(n, length, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, len(_VOCAB) + 4, (n, length), generator=g)


def trainer(device):
    """transformers.Trainer: a few optimizer steps on a tiny GPT-2; the logged losses."""
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    ids = _tokens(16, 16)
    data = [{"input_ids": row, "labels": row} for row in ids % 64]
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=4, per_device_train_batch_size=4, learning_rate=1e-3,
                                 logging_steps=1, report_to=[], save_strategy="no", seed=0,
                                 use_cpu=device == "cpu", dataloader_pin_memory=False)
        t = Trainer(model=model, args=args, train_dataset=data)
        t.train()
        used = str(next(t.model.parameters()).device.type)
        return {"device": used, "losses": [h["loss"] for h in t.state.log_history if "loss" in h]}


def accelerate_bf16(device):
    """accelerate's Accelerator(mixed_precision='bf16'): losses of a few steps on its own device."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    # a Trainer earlier in the process set up accelerate's state without mixed precision
    AcceleratorState._reset_state(reset_partial_state=True)
    acc = Accelerator(mixed_precision="bf16", cpu=device == "cpu")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, opt = acc.prepare(model, opt)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(32, 16, generator=g), torch.randn(32, 4, generator=g)
    losses = []
    for _ in range(4):
        loss = torch.nn.functional.mse_loss(model(x.to(acc.device)).float(), y.to(acc.device))
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return {"device": acc.device.type, "losses": losses}


def generate_static(device):
    """model.generate with a static KV cache, greedy: the new tokens."""
    model = _tiny_llama(device)
    ids = _tokens(2, 6).to(device)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=False,
                         cache_implementation="static")
    return {"tokens": out[:, ids.shape[1]:].cpu().tolist()}


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, **{w: i + 4 for i, w in enumerate(_VOCAB)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def pipeline_text(device):
    """pipeline('text-generation', device=...): the generated text, greedy."""
    from transformers import pipeline

    pipe = pipeline("text-generation", model=_tiny_llama("cpu"), tokenizer=_tokenizer(), device=device)
    out = pipe("w1 w5 w9 w13", max_new_tokens=8, do_sample=False)
    return {"device": pipe.device.type, "text": out[0]["generated_text"]}


def peft_lora(device):
    """peft LoRA: a few training steps, then merge_and_unload; outputs before and after the merge."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(_tiny_llama(device).train(), LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                                                                   target_modules=["q_proj", "v_proj"]))
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    ids = _tokens(4, 8).to(device)
    for _ in range(3):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    with torch.no_grad():
        before = model(input_ids=ids).logits
        merged = model.merge_and_unload()
        after = merged(input_ids=ids).logits
    return {"loss": loss.item(), "logits_sum": before.double().sum().item(),
            "merge_max_diff": (before - after).abs().max().item(), "merged_type": type(merged).__name__}


def diffusers_ddpm(device):
    """A diffusers UNet2DModel with a DDPM scheduler: a short denoising loop from fixed noise."""
    from diffusers import DDPMScheduler, UNet2DModel

    torch.manual_seed(0)
    unet = UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
                       block_out_channels=(16, 32), down_block_types=("DownBlock2D", "DownBlock2D"),
                       up_block_types=("UpBlock2D", "UpBlock2D"), norm_num_groups=8).to(device).eval()
    sched = DDPMScheduler(num_train_timesteps=50)
    sched.set_timesteps(5)
    g = torch.Generator().manual_seed(5)
    sample = torch.randn(2, 3, 8, 8, generator=g).to(device)
    with torch.no_grad():
        for t in sched.timesteps:
            eps = unet(sample, t).sample
            # the variance noise is drawn on the CPU so every device sees the same numbers
            sample = sched.step(eps, t, sample, generator=torch.Generator().manual_seed(int(t))).prev_sample
    return {"sample": sample.double().cpu().flatten()[:16].tolist(), "sum": sample.double().sum().item()}


PROGRAMS = {"trainer": trainer, "accelerate_bf16": accelerate_bf16, "generate_static": generate_static,
            "pipeline": pipeline_text, "peft_lora": peft_lora, "diffusers_ddpm": diffusers_ddpm}


def mismatches(result, reference, rtol=2e-2, atol=2e-3):
    """What differs between two runs' results: exact for tokens and text, close for numbers."""
    bad = []
    for name, ref in reference.items():
        got = result.get(name)
        if got is None or "error" in got or "error" in ref:
            bad.append(f"{name}: {got and got.get('error')} / reference {ref.get('error')}")
            continue
        for key, want in ref.items():
            have = got.get(key)
            if key == "device":
                continue
            if isinstance(want, (float, list)) and key not in ("tokens",):
                try:
                    torch.testing.assert_close(torch.tensor(have, dtype=torch.float64),
                                               torch.tensor(want, dtype=torch.float64), rtol=rtol, atol=atol)
                except AssertionError as e:
                    bad.append(f"{name}.{key}: {e}")
            elif have != want:
                bad.append(f"{name}.{key}: {have!r} != {want!r}")
    return bad


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--device", required=True)
    p.add_argument("--programs", default=",".join(PROGRAMS))
    p.add_argument("--hide-torch-musa", action="store_true", help="native CUDA's side: torch_musa cannot be imported")
    p.add_argument("--compare-with", help="a reference run's JSON file: print the mismatches, exit 1 if any")
    args = p.parse_args(argv)
    results = {}
    for name in args.programs.split(","):
        try:
            results[name] = PROGRAMS[name](args.device)
        except Exception as e:  # reported, so one failing program does not hide the others
            results[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
    print(json.dumps(results))
    if args.compare_with:
        with open(args.compare_with) as f:
            bad = mismatches(results, json.loads(f.read().strip().splitlines()[-1]))
        print("\n".join(bad) or "all programs match the reference")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

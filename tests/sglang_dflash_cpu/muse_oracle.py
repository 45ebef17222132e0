"""The training-side Muse Glimmer decoder against transformers' own, on a checkpoint.

Run by the SGLang CPU engine's interpreter, which holds transformers at SGLang 0.5.23's
pin (5.19, the first with Muse Glimmer): `python muse_oracle.py TARGET_DIR` prints one JSON
object: the largest logit difference between the project's `MuseGlimmerLM` (the model the
build trains, `reference_engine/muse_glimmer_model.py`) and transformers'
`MuseGlimmerForConditionalGeneration`, both in float32 on the checkpoint's weights, and
whether their greedy next tokens agree at every position.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reference_engine.muse_glimmer_model import MuseGlimmerLM, vendor_name
from reference_engine.recipe import MUSE_GLIMMER
from reference_engine.seed_configs import TokenIds, muse_glimmer_text


def main(folder: Path) -> dict[str, object]:
    from safetensors.torch import load_file
    from transformers import MuseGlimmerForConditionalGeneration

    torch.manual_seed(0)
    reference = MuseGlimmerForConditionalGeneration.from_pretrained(
        folder, dtype=torch.float32).eval()
    config = json.loads((folder / "config.json").read_text())
    ids = TokenIds(vocab_size=config["text_config"]["vocab_size"], eos=0, pad=1, mask=2)
    ours = MuseGlimmerLM(muse_glimmer_text(MUSE_GLIMMER, ids)).eval()
    stored = load_file(str(folder / "model.safetensors"))
    ours.load_state_dict({name: stored[vendor_name(name)].float()
                          for name in ours.state_dict()})
    tokens = torch.randint(3, 1000, (2, 80), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = reference(input_ids=tokens).logits.float()
        got, _ = ours(tokens)
    return {"max_abs_diff": float((got - expected).abs().max()),
            "logit_scale": float(expected.abs().max()),
            "same_argmax": bool(torch.equal(got.argmax(-1), expected.argmax(-1)))}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))

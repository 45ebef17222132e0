"""The server process loads its tokenizer as the class its checkpoint names
(reference_engine.loading.tokenizer_class), not through AutoTokenizer, whose import brings
transformers' model code: for every checkpoint the reference engine ships, the same class,
ids, text and chat template as AutoTokenizer's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reference_engine.loading import CheckpointError, load_tokenizer, tokenizer_class

transformers = pytest.importorskip(
    "transformers", reason="this environment lacks the reference extra (transformers)")

ENGINE = Path(__file__).resolve().parents[2] / "reference_engine"
SHIPPED = sorted(p.parent for p in ENGINE.glob("**/tokenizer_config.json"))
TEXTS = ["Natalia sold clips to 48 of her friends in April, and then she sold half as many "
         "clips in May. How many clips did Natalia sell altogether?",
         "déjà vu — 1,234.5 × 2 = ? \n\n\tTabs, emoji 🙂 and <mask> text", ""]
CHAT = [{"role": "user", "content": TEXTS[0]}]


def test_every_shipped_checkpoint_is_found() -> None:
    roots = {p.relative_to(ENGINE).parts[0] for p in SHIPPED}
    assert roots == {"tiny", "seed"} and len(SHIPPED) >= 7


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: str(p.relative_to(ENGINE)))
def test_the_same_tokenizer_as_auto_tokenizer(folder: Path) -> None:
    ours, auto = load_tokenizer(folder), transformers.AutoTokenizer.from_pretrained(folder)
    assert type(ours) is type(auto)
    for text in TEXTS:
        ids = ours(text)["input_ids"]
        assert ids == auto(text)["input_ids"]
        assert ours.decode(ids, skip_special_tokens=True) == \
            auto.decode(ids, skip_special_tokens=True)
    assert ours.chat_template == auto.chat_template
    if ours.chat_template:
        assert ours.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True) == \
            auto.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)


# what AutoTokenizer's import brings and the tokenizer never uses
MODEL_CODE = ("transformers.models.auto.auto_factory", "transformers.modeling_utils",
              "transformers.generation", "torch.distributed.fsdp", "sympy")


def test_loading_it_leaves_transformers_model_code_unimported() -> None:
    probe = ("import sys\n"
             "from pathlib import Path\n"
             "from reference_engine.loading import load_tokenizer\n"
             f"load_tokenizer(Path({str(ENGINE / 'tiny' / 'target')!r}))('hello')\n"
             f"print([m for m in {MODEL_CODE!r} if m in sys.modules])\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, cwd=ENGINE.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("config", [
    '{"tokenizer_class": "NoSuchTokenizerAnywhere"}', '{"tokenizer_class": "os.system"}',
    '{"tokenizer_class": 7}', "[1, 2]", "{not json", '{"tokenizer_class": "AutoConfig"}',
])
def test_an_unusable_named_class_falls_back_to_auto_tokenizer(tmp_path: Path,
                                                               config: str) -> None:
    (tmp_path / "tokenizer_config.json").write_text(config)
    assert tokenizer_class(tmp_path) is transformers.AutoTokenizer
    # no tokenizer files at all: one line naming the folder, never a traceback
    with pytest.raises(CheckpointError, match=str(tmp_path)):
        load_tokenizer(tmp_path)


def test_a_folder_without_a_tokenizer_config_uses_auto_tokenizer(tmp_path: Path) -> None:
    assert tokenizer_class(tmp_path) is transformers.AutoTokenizer
    (tmp_path / "tokenizer_config.json").write_bytes(b"\xff\xfe\x00garbage")
    assert tokenizer_class(tmp_path) is transformers.AutoTokenizer


# Each process of the engine keeps out of its imports what it never calls
# (reference_engine.loading.keep_out): the server's tokenizer without torch, the worker's
# models without scipy. Each answers as it does with them.
KEPT_OUT_TOKENIZERS = """
import json, sys
from pathlib import Path
from reference_engine.loading import SERVER_UNUSED, keep_out, load_tokenizer
keep_out(SERVER_UNUSED)
texts, chat, folders = json.loads(sys.argv[1])
answers = {}
for folder in folders:
    tokenizer = load_tokenizer(Path(folder))
    ids = [tokenizer(text)["input_ids"] for text in texts]
    answers[folder] = {
        "ids": ids, "text": [tokenizer.decode(i, skip_special_tokens=True) for i in ids],
        "chat": tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        if tokenizer.chat_template else None}
print(json.dumps({"answers": answers,
                  "imported": [m for m in SERVER_UNUSED if sys.modules.get(m) is not None]}))
"""


def test_the_server_process_tokenizer_answers_alike_without_torch() -> None:
    folders = [str(folder) for folder in SHIPPED]
    done = subprocess.run([sys.executable, "-c", KEPT_OUT_TOKENIZERS,
                           json.dumps([TEXTS, CHAT, folders])],
                          capture_output=True, text=True, timeout=300, cwd=ENGINE.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["imported"] == []
    for folder in folders:
        auto = transformers.AutoTokenizer.from_pretrained(folder)
        answer = found["answers"][folder]
        ids = [auto(text)["input_ids"] for text in TEXTS]
        assert answer["ids"] == ids, folder
        assert answer["text"] == [auto.decode(i, skip_special_tokens=True) for i in ids]
        assert answer["chat"] == (
            auto.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
            if auto.chat_template else None)


KEPT_OUT_DECODER = """
import sys
from reference_engine.loading import WORKER_UNUSED, Options, keep_out, load_decoder
keep_out(WORKER_UNUSED)
decoder, applied = load_decoder(Options(target=sys.argv[1], draft=sys.argv[2]))
print([m for m in WORKER_UNUSED if sys.modules.get(m) is not None], len(applied) > 0)
"""


def test_a_worker_loads_its_models_without_scipy() -> None:
    done = subprocess.run([sys.executable, "-c", KEPT_OUT_DECODER,
                           str(ENGINE / "tiny" / "target"),
                           str(ENGINE / "tiny" / "draft-capturable")],
                          capture_output=True, text=True, timeout=300, cwd=ENGINE.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]", "True"]

"""Synthetic GSM8K-style corpus for the tiny reference checkpoints.

Why synthetic: the engine must build its own weights offline, and nothing from the
GSM8K test set may leak into training. The text imitates the shape of the harness's
GSM8K prompts (SGLang's `run_eval gsm8k` protocol): `Question: ...\nAnswer: ...` with
GSM8K's calculator annotations (`<<a+b=c>>c`) and a final `#### N`, documents separated
by a blank line so that the model learns to open the next `Question` (a stop string)
once it has answered. The templates are deliberately regular: a tiny target then writes
predictable continuations, which is what gives a tiny draft a meaningful accept length.

Pure Python and deterministic for a given seed; no torch import.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

NAMES = (
    "Janet", "Tom", "Maria", "James", "Lily", "Ben", "Sara", "Carlos", "Emma", "John",
    "Aisha", "Mark", "Nina", "Paul", "Rosa", "Alex", "Kim", "David", "Grace", "Leo",
)
ITEMS = (
    "apples", "eggs", "books", "pencils", "cookies", "marbles", "stickers", "cupcakes",
    "oranges", "cards", "shirts", "toys", "flowers", "candies", "bottles", "boxes",
)
PLACES = ("the store", "the market", "the bakery", "the fair", "school", "the shop")
# Everyday words of grade-school word problems. Free-form questions mix them at random so
# the target learns to answer in the template whatever the question says: real GSM8K
# questions are out of distribution for a model this small, and without this it babbles.
_WORD_TEXT = (
    "the a an of to and in for on with at by from each every per day week month year hour "
    "minute dollars cents money price cost pay paid buy bought sell sold spend spent save "
    "earn earns makes made has have had gets got gives gave takes took needs wants uses "
    "left more less than twice half third quarter times total many much how what if then "
    "after before during while some all rest remaining first second third last next new old "
    "big small red blue green students class teacher school farm farmer garden house car "
    "train bus trip miles feet inches pounds cups pages books pizza slices cake ducks dogs "
    "cats chickens cows trees plants seeds boxes bags bottles glasses tickets hours days "
    "weeks friends family mother father sister brother team game games points goals runs "
    "works walks drives reads eats drinks bakes plants picks collects shares splits decides "
    "market store shop bakery party birthday morning evening night breakfast lunch dinner "
    "water juice milk eggs apples oranges candy cookies muffins fruit vegetables percent"
)
WORDS = tuple(_WORD_TEXT.split())


def _pronoun(name: str) -> str:
    return "She" if name in {"Janet", "Maria", "Lily", "Sara", "Emma", "Aisha", "Nina",
                             "Rosa", "Kim", "Grace"} else "He"


def _calc(expression: str, value: int) -> str:
    """GSM8K's calculator annotation: `16-3=<<16-3=13>>13`."""
    return f"{expression} = <<{expression.replace(' ', '')}={value}>>{value}"


Example = tuple[str, str]


def _buy_more(rng: random.Random) -> Example:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b = rng.randint(2, 40), rng.randint(2, 40)
    question = (f"{name} has {a} {item}. {_pronoun(name)} buys {b} more {item} at "
                f"{rng.choice(PLACES)}. How many {item} does {name} have now?")
    answer = f"{name} has {_calc(f'{a} + {b}', a + b)} {item} now.\n#### {a + b}"
    return question, answer


def _give_away(rng: random.Random) -> Example:
    name, friend, item = rng.choice(NAMES), rng.choice(NAMES), rng.choice(ITEMS)
    b = rng.randint(2, 30)
    a = b + rng.randint(1, 40)
    question = (f"{name} had {a} {item} and gave {b} of them to {friend}. "
                f"How many {item} does {name} have left?")
    answer = f"{name} has {_calc(f'{a} - {b}', a - b)} {item} left.\n#### {a - b}"
    return question, answer


def _sell_per_day(rng: random.Random) -> Example:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    made, used, price = rng.randint(10, 30), rng.randint(1, 9), rng.randint(2, 9)
    left = made - used
    question = (f"{name} makes {made} {item} per day. {_pronoun(name)} uses {used} of them "
                f"and sells the rest at {rng.choice(PLACES)} for ${price} each. "
                f"How much in dollars does {name} make every day?")
    answer = (f"{name} sells {_calc(f'{made} - {used}', left)} {item} a day.\n"
              f"{_pronoun(name)} makes {_calc(f'{left} * {price}', left * price)} dollars "
              f"every day.\n#### {left * price}")
    return question, answer


def _groups(rng: random.Random) -> Example:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    boxes, per_box = rng.randint(2, 12), rng.randint(2, 12)
    total = boxes * per_box
    question = (f"{name} has {boxes} boxes with {per_box} {item} in each box. "
                f"How many {item} does {name} have in total?")
    answer = (f"{name} has {_calc(f'{boxes} * {per_box}', total)} {item} in total.\n"
              f"#### {total}")
    return question, answer


def _share(rng: random.Random) -> Example:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    people, each = rng.randint(2, 10), rng.randint(2, 12)
    total = people * each
    question = (f"{name} shares {total} {item} equally among {people} friends. "
                f"How many {item} does each friend get?")
    answer = f"Each friend gets {_calc(f'{total} / {people}', each)} {item}.\n#### {each}"
    return question, answer


def _two_step(rng: random.Random) -> Example:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b, c = rng.randint(5, 40), rng.randint(2, 20), rng.randint(1, 4)
    first = a + b
    total = first * c
    question = (f"{name} has {a} {item} and finds {b} more. Then {_pronoun(name).lower()} "
                f"multiplies the pile by {c}. How many {item} are there now?")
    answer = (f"First, {name} has {_calc(f'{a} + {b}', first)} {item}.\n"
              f"Then there are {_calc(f'{first} * {c}', total)} {item}.\n#### {total}")
    return question, answer


def _cost(rng: random.Random) -> Example:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    count, price, paid_extra = rng.randint(2, 15), rng.randint(2, 20), rng.randint(1, 20)
    cost = count * price
    paid = cost + paid_extra
    question = (f"{name} buys {count} {item} for ${price} each and pays with ${paid}. "
                f"How much change does {name} get?")
    answer = (f"The {item} cost {_calc(f'{count} * {price}', cost)} dollars.\n"
              f"{name} gets {_calc(f'{paid} - {cost}', paid_extra)} dollars in change.\n"
              f"#### {paid_extra}")
    return question, answer


def _weekly(rng: random.Random) -> Example:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    per_day, days, spare = rng.randint(2, 20), rng.randint(2, 7), rng.randint(1, 30)
    week = per_day * days
    total = week + spare
    question = (f"{name} collects {per_day} {item} every day for {days} days and already "
                f"had {spare} {item}. How many {item} does {name} have at the end?")
    answer = (f"{name} collects {_calc(f'{per_day} * {days}', week)} {item}.\n"
              f"In total {name} has {_calc(f'{week} + {spare}', total)} {item}.\n"
              f"#### {total}")
    return question, answer


def _word(rng: random.Random) -> str:
    """A bank word, or (1 in 4) a made-up one: real questions hold words the tokenizer
    never saw, which arrive as unfamiliar byte pieces; the target must stay on format."""
    if rng.random() < 0.25:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
    return rng.choice(WORDS)


def _sentence(rng: random.Random, numbers: list[int]) -> str:
    words = [_word(rng) for _ in range(rng.randint(5, 14))]
    if numbers:
        words.insert(rng.randrange(len(words)), str(numbers.pop(0)))
    return " ".join(words).capitalize() + rng.choice((".", ".", ",", "?"))


def _free_form(rng: random.Random) -> Example:
    """A question of random everyday words around two or three numbers; a templated answer."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b = rng.randint(2, 60), rng.randint(2, 30)
    numbers = [a, b]
    question = " ".join(_sentence(rng, numbers) for _ in range(rng.randint(2, 4)))
    question = question.rstrip(".,?") + "?"
    if rng.random() < 0.5:
        answer = f"{name} has {_calc(f'{a} + {b}', a + b)} {item}.\n#### {a + b}"
    else:
        total = a * b
        answer = (f"{name} gets {_calc(f'{a} * {b}', total)} {item}.\n"
                  f"{_pronoun(name)} has {total} {item} in total.\n#### {total}")
    return question, answer


TEMPLATES: tuple[Callable[[random.Random], Example], ...] = (
    _buy_more, _give_away, _sell_per_day, _groups, _share, _two_step, _cost, _weekly,
    _free_form, _free_form, _free_form, _free_form,
)


def format_example(question: str, answer: str) -> str:
    """One few-shot block exactly as the harness's GSM8K prompt writes it."""
    return f"Question: {question}\nAnswer: {answer}\n\n"


def examples(seed: int, count: int) -> Iterator[Example]:
    """`count` (question, answer) pairs, deterministic for `seed`."""
    rng = random.Random(seed)
    for _ in range(count):
        yield rng.choice(TEMPLATES)(rng)


def documents(seed: int, count: int, shots_max: int = 2) -> Iterator[str]:
    """Training documents: 0..shots_max solved examples, then one more, like a few-shot prompt.

    Why several examples per document: evaluation prompts are few-shot, so the model
    must learn to continue after earlier solved examples and to start a new `Question`.
    """
    rng = random.Random(seed + 1)
    pairs = examples(seed, count * (shots_max + 1))
    for _ in range(count):
        shots = rng.randint(0, shots_max)
        yield "".join(format_example(*next(pairs)) for _ in range(shots + 1))


def prompts(seed: int, count: int) -> Iterator[str]:
    """Prompts ending in `Answer:` (as the harness sends them), for draft distillation."""
    rng = random.Random(seed + 2)
    pairs = examples(seed + 3, count * 2)
    for _ in range(count):
        shot = format_example(*next(pairs)) if rng.random() < 0.5 else ""
        question, _ = next(pairs)
        yield f"{shot}Question: {question}\nAnswer:"

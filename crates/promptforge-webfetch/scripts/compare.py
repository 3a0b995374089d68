#!/usr/bin/env python3
"""Article-extraction comparison: web_fetch's readability path against trafilatura and
readability-lxml, on the same pages in one run.

Run it through ``compare.sh`` (which builds the Rust side in release and installs the Python
peers into their own venv). Datasets are read from where they lie; nothing is copied:

  --scrapinghub DIR   the article-extraction benchmark (ground-truth.json, html/*.html.gz)
  --wcxb DIR          WCXB (metadata.json, {dev,test}/ground-truth/*.json, {dev,test}/html/)
  --mozilla DIR       Mozilla Readability's repository (test/test-pages/*/source.html and
                      expected.html)
  --l3s-gn1 DIR       L3S-GN1 (621 Google News pages of 2008; research use only): a folder
                      with input/<id>.html and GoldStandard/<id>.txt, the page annotated
                      with x-nc-sel* classes; the truth is the "full text" (x-nc-sel2)
                      blocks (headline, captions, related links and comments are not)
  --dragnet DIR       Dragnet's data (1,381 news and blog pages of 2012): input/<id>.html and
                      GoldStandard/<id>.txt, the truth being the text before its comments
                      marker. (Both as mirrored, in that layout, by the
                      html-cleaning-dataset-merged repository.)
  --trafilatura DIR   trafilatura's repository (tests/evaldata.json, tests/eval/ and
                      tests/cache/): its evaluation set, 990 pages (news, blogs, shops; many
                      languages) with a few must-include and must-exclude snippets each.
                      trafilatura is developed against this set: a development set for us,
                      never a fair contest for the peers' sake

Scoring (every system, every dataset, the same way):

* Text. trafilatura's output is plain text. readability-lxml's summary HTML is turned into
  text by html-text (as the article-extraction benchmark does). Ours is Markdown: the leading
  ``# Title`` line that the tool writes is removed (the peers return no title either), image
  syntax is dropped, a link keeps its text and loses its target (a target may hold balanced
  parentheses, as image-CDN URLs do), Markdown escapes and ``_`` emphasis markers are
  removed, and so are ordered-list markers (``1.``), code-fence lines with their info string
  (``python``) and ``<br>`` in table cells: syntax, not text (``*``, ``#``, ``|``, ``>`` are
  not word characters and never become tokens). Mozilla's expected.html is turned into text
  by html-text. Until the sixth round the script kept list numbers, fence info strings,
  ``br`` and the tail of a target holding ``)`` as words; ``BENCHMARKS.md`` gives that
  round's figures both ways.
* Tokens: the Unicode ``\\w+`` matches of Python's ``re``.
* P / R / F1 (the goal figures) are the article-extraction benchmark's own metric
  (``string_shingle_matching`` in its evaluate.py): each text becomes the multiset of its
  4-grams of consecutive tokens (case kept); per page TP is the multiset intersection of
  predicted and true 4-grams, FP the predicted surplus, FN the true surplus; precision =
  TP / (TP + FP), recall = TP / (TP + FN), both 1 when FP = FN = 0. Over a dataset: the mean
  precision and the mean recall over its pages, and F1 is the harmonic mean of those two
  means. A 4-gram is lost when any of its words is, so word order and stray words count.
* The unigram columns are the same with single lowercased tokens instead of 4-grams (a
  bag-of-words score, kinder to reordering).
* with / without (WCXB only): the share of the dataset's must-include snippets found in the
  output, and of its boilerplate snippets found there (lower is better), after the same
  tokenization.
* trafilatura's evaluation set has no whole ground-truth text, so it is scored its own way
  (``tests/eval_common.py`` there): per page, each ``with`` snippet found in the output is a
  true positive and each one missing a false negative, each ``without`` snippet found a
  false positive; P = TP / (TP + FP), R = TP / (TP + FN), over all snippets of the set. A
  snippet is found when it is a substring of the output after both lose their whitespace
  and the Markdown emphasis characters ``*`` and ``_`` (every system the same way; the
  set's own script collapses whitespace instead, which charges a system for a space the
  page's markup lacks, ``the<a>link</a>``). Pages are decoded once (UTF-8, else the
  ``charset`` the page declares, else windows-1252) and every system reads that text.
* Speed: pages per second of the extraction call alone (the page is already a string in
  memory; one process, one thread, one page at a time).

``--explain`` (a development aid) also asks the Rust side what each cleanup rule removed and
writes ``<dataset>-explain.md``: per rule, how many of the ground truth's 4-grams it removed
that the cleaned text then lacks (recall it cost) and how many other 4-grams it removed; the before-cleanup score
next to the after-cleanup one; and every removed block of four or more tokens whose 4-grams
are mostly in the ground truth (a suspected wrong removal), by page.

``--full-article`` adds a row, ``web_fetch (full article)``: the same binary rendering with
``Rendering::FullArticle`` (a ``FetchConfig`` with ``article_cleanup(false)``), the article
readability finds without the cleanup rules, which is what Mozilla's expected outputs hold.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

TOKEN_RE = re.compile(r"\w+", re.UNICODE)


# ---------------------------------------------------------------- datasets


def read_text(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def load_scrapinghub(root: Path) -> list[dict]:
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for key in sorted(truth):
        pages.append(
            {
                "id": key,
                "path": str(root / "html" / f"{key}.html.gz"),
                "url": truth[key].get("url"),
                "truth": truth[key].get("articleBody", ""),
            }
        )
    return pages


def load_wcxb(root: Path, split: str, types: set[str]) -> list[dict]:
    meta = json.loads((root / "metadata.json").read_text(encoding="utf-8"))["files"]
    pages = []
    for key in sorted(meta):
        info = meta[key]
        if info["split"] != split or info["page_type"] not in types:
            continue
        gt = json.loads((root / split / "ground-truth" / f"{key}.json").read_text(encoding="utf-8"))
        pages.append(
            {
                "id": key,
                "path": str(root / split / "html" / f"{key}.html.gz"),
                "url": gt.get("url"),
                "truth": gt["ground_truth"].get("main_content") or "",
                "with": gt["ground_truth"].get("with") or [],
                "without": gt["ground_truth"].get("without") or [],
            }
        )
    return pages


def decode_page(data: bytes) -> str:
    """UTF-8, else the charset the page declares, else windows-1252 (what browsers assume)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    m = re.search(rb"""charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", data[:4096])
    if m:
        try:
            return data.decode(m.group(1).decode("ascii"), errors="replace")
        except LookupError:
            pass
    return data.decode("cp1252", errors="replace")


def load_trafilatura(root: Path, out_dir: Path) -> list[dict]:
    """trafilatura's evaluation set; each page decoded once into ``out_dir`` for every system."""
    tests = root / "tests"
    evaldata = json.loads((tests / "evaldata.json").read_text(encoding="utf-8"))
    decoded = out_dir / "trafilatura-eval-pages"
    decoded.mkdir(parents=True, exist_ok=True)
    pages = []
    for i, url in enumerate(sorted(evaldata)):
        item = evaldata[url]
        src = next((tests / d / item["file"] for d in ("cache", "eval") if (tests / d / item["file"]).is_file()), None)
        if src is None:
            sys.exit(f"{url}: {item['file']} is in neither tests/cache nor tests/eval")
        path = decoded / f"{i:04d}.html"
        path.write_text(decode_page(src.read_bytes()), encoding="utf-8")
        pages.append(
            {"id": f"{i:04d}", "path": str(path), "url": url, "with": item["with"], "without": item["without"]}
        )
    return pages


def load_goldstandard(root: Path, kind: str, out_dir: Path) -> list[dict]:
    """L3S-GN1 or Dragnet in the input/ + GoldStandard/ layout; pages decoded once."""
    import lxml.html

    decoded = out_dir / f"{kind}-pages"
    decoded.mkdir(parents=True, exist_ok=True)
    pages = []
    for gold in sorted((root / "GoldStandard").glob("*.txt")):
        src = root / "input" / f"{gold.stem}.html"
        if not src.is_file():
            continue
        if kind == "l3s-gn1":
            doc = lxml.html.fromstring(gold.read_bytes())
            truth = "\n".join(
                el.text_content()
                for el in doc.iter()
                if isinstance(el.tag, str) and "x-nc-sel2" in (el.get("class") or "").split()
            )
        else:
            truth = gold.read_bytes().decode("utf-8", errors="replace").split("!@#$%^&*() COMMENTS")[0]
        if not truth.strip():
            continue
        path = decoded / f"{gold.stem}.html"
        path.write_text(decode_page(src.read_bytes()), encoding="utf-8")
        pages.append({"id": gold.stem, "path": str(path), "url": "http://news.example/", "truth": truth})
    return pages


def load_mozilla(root: Path) -> list[dict]:
    import html_text

    base = root / "test" / "test-pages"
    pages = []
    for d in sorted(p for p in base.iterdir() if (p / "source.html").is_file()):
        expected = d / "expected.html"
        if not expected.is_file():
            continue
        pages.append(
            {
                "id": d.name,
                "path": str(d / "source.html"),
                "url": "http://fakehost/test/page.html",
                "truth": html_text.extract_text(read_text(expected)),
            }
        )
    return pages


# ---------------------------------------------------------------- systems

# a link destination may hold balanced parentheses (CommonMark), as image-CDN URLs do:
# `.../filters:format_auto():quality(70)/a.jpg`; one level of nesting is matched
DEST = r"\((?:[^()]|\([^()]*\))*\)"
IMAGE_RE = re.compile(r"!\[[^\]]*\]" + DEST)
LINK_RE = re.compile(r"\[([^\]]*)\]" + DEST)
ESCAPE_RE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")
UNDERSCORE_RE = re.compile(r"(?<![^\W_])_+|_+(?![^\W_])")


# Markdown syntax that \w+ would read as words: an ordered list's marker (`1.`), a code
# fence's info string (`````python``), a line break inside a table cell (`<br>`)
ORDERED_MARKER_RE = re.compile(r"^([ \t>]*)\d{1,9}[.)](?=[ \t]|$)", re.MULTILINE)
FENCE_RE = re.compile(r"^[ \t>]*(`{3,}|~{3,}).*$", re.MULTILINE)
BREAK_RE = re.compile(r"<br\s*/?>", re.IGNORECASE)


def markdown_to_text(md: str) -> str:
    lines = md.split("\n")
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    text = "\n".join(lines)
    text = FENCE_RE.sub("", text)
    text = ORDERED_MARKER_RE.sub(r"\1", text)
    text = BREAK_RE.sub(" ", text)
    text = IMAGE_RE.sub(" ", text)
    # links may nest an image or brackets; a few passes reach the innermost first
    for _ in range(3):
        new = LINK_RE.sub(r"\1", text)
        if new == text:
            break
        text = new
    text = ESCAPE_RE.sub(r"\1", text)
    return UNDERSCORE_RE.sub(" ", text)


def run_ours(
    pages: list[dict], binary: Path, flags: tuple[str, ...] = ()
) -> tuple[dict, dict, float, dict]:
    manifest = "".join(
        json.dumps({"id": p["id"], "path": p["path"], "url": p["url"]}) + "\n" for p in pages
    )
    done = subprocess.run(
        [str(binary), *flags],
        input=manifest,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"extract_pages failed: {done.stderr.strip()}")
    texts, markdown, seconds, explained = {}, {}, 0.0, {}
    for line in done.stdout.split("\n"):
        if not line.strip():
            continue
        rec = json.loads(line)
        markdown[rec["id"]] = rec["markdown"]
        texts[rec["id"]] = markdown_to_text(rec["markdown"])
        seconds += rec["seconds"]
        if "dropped" in rec:
            explained[rec["id"]] = rec
    return texts, markdown, seconds, explained


def run_trafilatura(pages: list[dict], html: dict) -> tuple[dict, float]:
    import trafilatura

    texts, seconds = {}, 0.0
    for p in pages:
        start = time.perf_counter()
        out = trafilatura.extract(html[p["id"]], url=p["url"], include_comments=False)
        seconds += time.perf_counter() - start
        texts[p["id"]] = out or ""
    return texts, seconds


def run_readability_lxml(pages: list[dict], html: dict) -> tuple[dict, float]:
    import html_text
    from readability import Document

    texts, seconds = {}, 0.0
    for p in pages:
        start = time.perf_counter()
        try:
            summary = Document(html[p["id"]], url=p["url"]).summary(html_partial=True)
            out = html_text.extract_text(summary)
        except Exception:  # the library raises on some pages; count it as an empty answer
            out = ""
        seconds += time.perf_counter() - start
        texts[p["id"]] = out
    return texts, seconds


# ---------------------------------------------------------------- metrics


def tokens(text: str) -> list[str]:
    return [t.lower() for t in TOKEN_RE.findall(text or "")]


def ratio(tp: float, total: float, other_empty: bool) -> float:
    if total == 0:
        return 1.0 if other_empty else 0.0
    return tp / total


def token_scores(truth: str, pred: str) -> tuple[float, float]:
    t, p = Counter(tokens(truth)), Counter(tokens(pred))
    tp = sum((t & p).values())
    nt, np_ = sum(t.values()), sum(p.values())
    return ratio(tp, np_, nt == 0), ratio(tp, nt, np_ == 0)


def shingle_scores(truth: str, pred: str, n: int = 4) -> tuple[float, float] | None:
    """The article-extraction benchmark's string_shingle_matching (case kept, as there)."""

    def shingles(text: str) -> Counter:
        toks = TOKEN_RE.findall(text or "")
        return Counter(tuple(toks[i : i + n]) for i in range(max(1, len(toks) - n + 1)) if toks[i : i + n])

    ts, ps = shingles(truth), shingles(pred)
    tp = sum((ts & ps).values())
    fp = sum((ps - ts).values())
    fn = sum((ts - ps).values())
    if fp == fn == 0:
        return 1.0, 1.0
    prec = 0.0 if tp == fp == 0 else tp / (tp + fp)
    rec = 0.0 if tp == fn == 0 else tp / (tp + fn)
    return prec, rec


def explain_report(name: str, pages: list[dict], texts: dict, explained: dict) -> str:
    """Per-rule attribution of the cleanup's removals against the ground truth."""

    def shingles(text: str) -> Counter:
        toks = TOKEN_RE.findall(text or "")
        return Counter(tuple(toks[i : i + 4]) for i in range(len(toks) - 3))

    per_rule: dict[str, list[int]] = {}
    suspects = []
    before, after = [], []
    for p in pages:
        rec = explained.get(p["id"])
        before_text = markdown_to_text(rec["uncleaned"]) if rec else texts.get(p["id"], "")
        before.append(shingle_scores(p["truth"], before_text))
        after.append(shingle_scores(p["truth"], texts.get(p["id"], "")))
        if not rec or not rec.get("applied", True):
            continue
        # the truth's 4-grams the cleaned text lacks: a removed block is charged only for
        # those (a repeated block whose first copy stayed costs nothing), each once
        missing = shingles(p["truth"]) - shingles(texts.get(p["id"], ""))
        for d in rec["dropped"]:
            sh = shingles(d["text"])
            if not sh:
                continue
            lost = sh & missing
            missing -= lost
            hit = sum(lost.values())
            total = sum(sh.values())
            row = per_rule.setdefault(d["rule"], [0, 0, 0, 0])
            row[0] += 1
            row[1] += hit
            row[2] += total - hit
            if hit * 2 >= total:
                row[3] += 1
                suspects.append((p["id"], d["rule"], hit, total, d["text"]))
    b, a = aggregate(before), aggregate(after)
    out = [
        f"# {name}: what the cleanup removed ({len(pages)} pages)",
        "",
        f"before the cleanup: P {b['precision']:.4f} R {b['recall']:.4f} F1 {b['f1']:.4f}",
        f"after the cleanup:  P {a['precision']:.4f} R {a['recall']:.4f} F1 {a['f1']:.4f}",
        "",
        "| rule | blocks | truth 4-grams lost (recall cost) | other 4-grams removed | blocks mostly lost truth |",
        "| --- | --- | --- | --- | --- |",
    ]
    for rule, (n, hit, miss, mostly) in sorted(per_rule.items(), key=lambda kv: -kv[1][1]):
        out.append(f"| {rule} | {n} | {hit} | {miss} | {mostly} |")
    out += ["", "## Blocks mostly in the ground truth (suspected wrong removals)", ""]
    for pid, rule, hit, total, text in sorted(suspects, key=lambda s: -s[2]):
        snippet = text if len(text) <= 300 else text[:300] + " ..."
        out.append(f"- `{pid}` **{rule}** {hit}/{total}: {snippet}")
    return "\n".join(out) + "\n"


def aggregate(per_page: list[tuple[float, float]]) -> dict:
    prec = statistics.mean(p for p, _ in per_page)
    rec = statistics.mean(r for _, r in per_page)
    f1 = 0.0 if prec + rec == 0 else 2 * prec * rec / (prec + rec)
    return {"precision": prec, "recall": rec, "f1": f1}


def snippet_rates(pages: list[dict], texts: dict) -> tuple[float, float] | None:
    want = [(p["id"], s) for p in pages for s in p.get("with", [])]
    avoid = [(p["id"], s) for p in pages for s in p.get("without", [])]
    if not want and not avoid:
        return None

    def norm(s: str) -> str:
        return " ".join(tokens(s))

    normed = {k: norm(v) for k, v in texts.items()}
    w = sum(norm(s) in normed[k] for k, s in want) / max(1, len(want))
    wo = sum(norm(s) in normed[k] for k, s in avoid) / max(1, len(avoid))
    return w, wo


# ---------------------------------------------------------------- report


def evaluate(name: str, pages: list[dict], systems: dict, out_dir: Path) -> list[str]:
    lines = [
        f"### {name} ({len(pages)} pages)",
        "",
        "| system | P | R | **F1** | unigram P | unigram R | unigram F1 | with / without | pages/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    per_page_all = {}
    for sys_name, (texts, seconds) in systems.items():
        tok = [token_scores(p["truth"], texts.get(p["id"], "")) for p in pages]
        shi = [shingle_scores(p["truth"], texts.get(p["id"], "")) for p in pages]
        t, s = aggregate(tok), aggregate(shi)
        snip = snippet_rates(pages, texts)
        snip_s = f"{snip[0]:.3f} / {snip[1]:.3f}" if snip else "-"
        speed = len(pages) / seconds if seconds > 0 else float("inf")
        lines.append(
            f"| {sys_name} | {s['precision']:.3f} | {s['recall']:.3f} | **{s['f1']:.3f}** | "
            f"{t['precision']:.3f} | {t['recall']:.3f} | {t['f1']:.3f} | {snip_s} | {speed:.1f} |"
        )
        per_page_all[sys_name] = {
            p["id"]: {"precision": a[0], "recall": a[1], "unigram_precision": u[0], "unigram_recall": u[1]}
            for p, a, u in zip(pages, shi, tok)
        }
    lines.append("")
    (out_dir / f"{slug(name)}-scores.json").write_text(json.dumps(per_page_all, indent=1))
    return lines


def evaluate_snippets(name: str, pages: list[dict], systems: dict, out_dir: Path) -> list[str]:
    """trafilatura's evaluation-set metric: snippet counts over the whole set."""

    def squeeze(text: str) -> str:
        return re.sub(r"[\s*_]+", "", text or "")

    lines = [
        f"### {name} ({len(pages)} pages; snippets)",
        "",
        "| system | P | R | **F1** | TP | FP | FN | pages/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    per_page_all = {}
    for sys_name, (texts, seconds) in systems.items():
        tp = fp = fn = 0
        per_page = {}
        for p in pages:
            out = squeeze(texts.get(p["id"], ""))
            found = [w for w in p["with"] if squeeze(w) in out]
            leaked = [w for w in p["without"] if squeeze(w) in out]
            tp += len(found)
            fn += len(p["with"]) - len(found)
            fp += len(leaked)
            per_page[p["id"]] = {
                "url": p["url"],
                "missed": [w for w in p["with"] if w not in found],
                "leaked": leaked,
            }
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        speed = len(pages) / seconds if seconds > 0 else float("inf")
        lines.append(
            f"| {sys_name} | {prec:.3f} | {rec:.3f} | **{f1:.3f}** | {tp} | {fp} | {fn} | {speed:.1f} |"
        )
        per_page_all[sys_name] = per_page
    lines.append("")
    (out_dir / f"{slug(name)}-snippets.json").write_text(json.dumps(per_page_all, indent=1, ensure_ascii=False))
    return lines


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", type=Path, required=True, help="the built extract_pages example")
    ap.add_argument("--scrapinghub", type=Path)
    ap.add_argument("--wcxb", type=Path)
    ap.add_argument("--wcxb-split", default="test", choices=["dev", "test"])
    ap.add_argument("--wcxb-types", default="article", help="comma-separated page types")
    ap.add_argument("--mozilla", type=Path)
    ap.add_argument("--l3s-gn1", type=Path, help="L3S-GN1 in the input/ + GoldStandard/ layout")
    ap.add_argument("--dragnet", type=Path, help="Dragnet's data in the input/ + GoldStandard/ layout")
    ap.add_argument("--trafilatura", type=Path, help="trafilatura's repository (its evaluation set)")
    ap.add_argument("--ours-only", action="store_true", help="skip the peers (development runs)")
    ap.add_argument(
        "--explain",
        action="store_true",
        help="also write <dataset>-explain.md: what each cleanup rule removed, against the truth",
    )
    ap.add_argument(
        "--full-article",
        action="store_true",
        help="also score the article without the cleanup rules (web_fetch full article)",
    )
    ap.add_argument("--out", type=Path, default=Path("target/webfetch-compare"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    datasets = []
    if args.scrapinghub:
        datasets.append(("article-extraction-benchmark", load_scrapinghub(args.scrapinghub)))
    if args.wcxb:
        types = set(args.wcxb_types.split(","))
        datasets.append(
            (f"WCXB {args.wcxb_split} {'+'.join(sorted(types))}", load_wcxb(args.wcxb, args.wcxb_split, types))
        )
    if args.mozilla:
        datasets.append(("Mozilla Readability test pages", load_mozilla(args.mozilla)))
    if args.l3s_gn1:
        datasets.append(("L3S-GN1", load_goldstandard(args.l3s_gn1, "l3s-gn1", args.out)))
    if args.dragnet:
        datasets.append(("Dragnet", load_goldstandard(args.dragnet, "dragnet", args.out)))
    if args.trafilatura:
        datasets.append(("trafilatura evaluation set", load_trafilatura(args.trafilatura, args.out)))
    if not datasets:
        sys.exit("give at least one of --scrapinghub, --wcxb, --mozilla, --l3s-gn1, --dragnet, --trafilatura")

    report = []
    for name, pages in datasets:
        html = {p["id"]: read_text(Path(p["path"])) for p in pages}
        systems = {}
        texts, markdown, secs, explained = run_ours(
            pages, args.binary, ("--explain",) if args.explain else ()
        )
        systems["web_fetch"] = (texts, secs)
        if args.full_article:
            full_texts, _, full_secs, _ = run_ours(pages, args.binary, ("--full-article",))
            systems["web_fetch (full article)"] = (full_texts, full_secs)
        if args.explain and "truth" in pages[0]:
            (args.out / f"{slug(name)}-explain.md").write_text(
                explain_report(name, pages, texts, explained), encoding="utf-8"
            )
        if not args.ours_only:
            systems["trafilatura"] = run_trafilatura(pages, html)
            systems["readability-lxml"] = run_readability_lxml(pages, html)
        if "truth" in pages[0]:
            report += evaluate(name, pages, systems, args.out)
        else:
            report += evaluate_snippets(name, pages, systems, args.out)
        with (args.out / f"{slug(name)}-outputs.jsonl").open("w", encoding="utf-8") as f:
            for p in pages:
                rec = {"id": p["id"], "web_fetch_markdown": markdown.get(p["id"], "")}
                for sys_name, (t, _) in systems.items():
                    rec[sys_name] = t.get(p["id"], "")
                rec["truth"] = p.get("truth", {"with": p.get("with"), "without": p.get("without")})
                if p["id"] in explained:
                    for key in ("uncleaned", "dropped", "applied"):
                        rec[key] = explained[p["id"]][key]
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print("\n".join(report))


if __name__ == "__main__":
    main()

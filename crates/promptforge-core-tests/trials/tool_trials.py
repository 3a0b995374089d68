"""Tool-call trials against an OpenAI-compatible chat endpoint (llama-server or the gateway).

usage: tool_trials.py URL KEY MODEL APPROACH TASK N [SYSTEM]

URL is the base ending in /v1 (or llama-server's root); TASK is lookup, search, capital or
pages; N variants run (variant i has its own name and code, seeded by i). APPROACH "server"
counts only the tool_calls the server parsed; "bare" also parses a bare JSON call
({"name": ..., "arguments": {...}}) out of the text content, client-side. SYSTEM, when given,
is sent as a system message first. PROSE (environment) overrides the search task's prose.

Counts, per variant: the first turn is a parsed tool call with valid arguments ("called");
after the tool result the model ends with a final answer carrying the tool's data, or, for
pages, keeps calling for 3 rounds ("completed"). Not run by the test suite: it produced the
figures in BENCHMARKS.md ("promptforge-core-tests: the tool model").
"""
import json, os, sys, urllib.request, urllib.error, random, time

url, key, model, approach, task, n = sys.argv[1:7]
n = int(n)
hint = sys.argv[7] if len(sys.argv) > 7 else ""

NAMES = ["orion", "lyra", "vega", "draco", "cygnus", "perseus", "auriga", "hydra", "carina", "pavo",
         "lupus", "ara", "norma", "musca", "volans", "pictor", "dorado", "fornax", "sextans", "tucana"]
PRODUCTS = ["Quillbox", "Tandemly", "Fernwick", "Glimmerd", "Mossgate", "Pebblenet", "Rustlo", "Sundrift",
            "Tarnhold", "Umberlink", "Vexamo", "Wispforge", "Yarrowdb", "Zephyrkit", "Brambleos", "Cinderly",
            "Dewpoint", "Emberstack", "Flintcast", "Gorsefield"]
COUNTRIES = ["Freedonia", "Sylvania", "Ruritania", "Genovia", "Latveria", "Wakanda", "Elbonia", "Florin",
             "Guilder", "Zubrowka", "Vulgaria", "Tomainia", "Bacteria", "Moldavia", "Borduria", "Syldavia",
             "Kurdistan", "Molvania", "Pottsylvania", "Grand Fenwick"]

WEB_SEARCH_PARAMS = {"type": "object", "properties": {
    "query": {"type": "string", "description": "What to search for"},
    "count": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Number of results (1-20)"},
    "freshness": {"type": "string", "enum": ["pd", "pw", "pm", "py"], "description": "Past day, week, month or year"},
    "safe_search": {"type": "string", "enum": ["off", "moderate", "strict"]},
    "domains_include": {"type": "array", "items": {"type": "string"}, "maxItems": 20, "description": "Only these hostnames"},
    "domains_exclude": {"type": "array", "items": {"type": "string"}, "maxItems": 20, "description": "Never these hostnames"},
    "country": {"type": "string", "description": "Country code, such as US"},
    "language": {"type": "string", "description": "Language code, such as en"}},
    "required": ["query"], "additionalProperties": False}

def tool(name, desc, params, required):
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": params, "required": required, "additionalProperties": False}}}

def variant(i):
    rng = random.Random(i)
    code = str(rng.randint(1000, 9999))
    if task == "lookup":
        name = NAMES[i % len(NAMES)]
        tools = [tool("lookup_code", "Look up the access code of a project by its name",
                      {"name": {"type": "string", "description": "The project name"}}, ["name"])]
        prose = (f"What is the access code of project {name}? Call the lookup_code tool to find it, "
                 f"then answer with the code in one short sentence.")
        def run(call):
            a = json.loads(call["function"]["arguments"])
            assert call["function"]["name"] == "lookup_code", call
            assert a.get("name", "").lower() == name, a
            return f"The access code of project {name} is {code}."
        return tools, prose, run, code
    if task == "search":
        prod = PRODUCTS[i % len(PRODUCTS)]
        tools = [{"type": "function", "function": {"name": "web_search",
                  "description": "search the web for current information", "parameters": WEB_SEARCH_PARAMS}}]
        prose = os.environ.get("PROSE", "What is the code name of the latest {prod} release? Search the web for it, then answer in one short sentence with the code name.").format(prod=prod)
        token = f"Zeta-{code}"
        def run(call):
            a = json.loads(call["function"]["arguments"])
            assert call["function"]["name"] == "web_search", call
            assert a.get("query"), a
            body = json.dumps({"query": a["query"], "results": [{"title": f"{prod} release notes",
                "url": f"https://{prod.lower()}.example/releases", "description":
                f"The latest {prod} release is code-named {token}.", "site_name": f"{prod.lower()}.example"}]})
            nonce = "9f" * 16
            return f'<untrusted-input nonce="{nonce}">\n{body}\n</untrusted-input nonce="{nonce}">'
        return tools, prose, run, token
    if task == "pages":
        name = NAMES[i % len(NAMES)]
        tools = [tool("read_page", "Read one page of a long report",
                      {"page": {"type": "integer", "description": "The page number, from 1"}}, ["page"])]
        prose = (f"Read the report {name} page by page with the read_page tool, starting at page 1. "
                 f"Keep reading the next page until the tool says the report has ended, then summarise it.")
        def run(call):
            a = json.loads(call["function"]["arguments"])
            p = int(a["page"])
            return f"Page {p} of 50 of report {name}: nothing important yet. The report has not ended: read page {p + 1} next."
        return tools, prose, run, None
    if task == "capital":
        country = COUNTRIES[i % len(COUNTRIES)]
        tools = [tool("country_facts", "Look up the capital city and population of a country",
                      {"country": {"type": "string", "description": "The country name"}}, ["country"])]
        city = f"Port {NAMES[i % len(NAMES)].title()}"
        prose = f"Use the country_facts tool to find the capital of {country}, then name the capital in one short sentence."
        def run(call):
            a = json.loads(call["function"]["arguments"])
            assert a.get("country", "").lower() == country.lower(), a
            return json.dumps({"country": country, "capital": city, "population": int(code) * 1000})
        return tools, prose, run, city
    raise SystemExit("unknown task")

def post(body):
    req = urllib.request.Request(url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        return {"choices": [{"message": {"content": f"HTTP {e.code}: {e.read()[:200]!r}"}}]}

def bare_calls(text, names, rnd):
    """Whole content = one or more JSON objects {"name": offered, "arguments": {...}}, one per line,
    optionally inside one ``` / ```json fence."""
    t = text.strip()
    if t.startswith("```"):
        first_nl = t.find("\n")
        if first_nl < 0 or not t.endswith("```"):
            return []
        t = t[first_nl + 1:-3].strip()
    out = []
    dec = json.JSONDecoder()
    i = 0
    while i < len(t):
        while i < len(t) and t[i].isspace():
            i += 1
        if i >= len(t):
            break
        try:
            obj, j = dec.raw_decode(t, i)
        except ValueError:
            return []
        if not isinstance(obj, dict) or obj.get("name") not in names or not isinstance(obj.get("arguments"), dict):
            return []
        out.append({"id": f"call_{rnd}_{len(out)}", "type": "function",
                    "function": {"name": obj["name"], "arguments": json.dumps(obj["arguments"])}})
        i = j
    return out

ok_first = ok_final = 0
log = []
t0 = time.time()
for i in range(n):
    tools, prose, run, want = variant(i)
    messages = []
    if hint:
        messages.append({"role": "system", "content": hint})
    messages.append({"role": "user", "content": "You are a helpful assistant. " + prose})
    events = []
    first_ok = final_ok = False
    for rnd in range(4):
        body = {"model": model, "messages": messages, "tools": tools, "temperature": 0, "max_tokens": 160}
        resp = post(body)
        msg = resp["choices"][0]["message"]
        calls = msg.get("tool_calls") or []
        if not calls and approach.startswith("bare"):
            calls = bare_calls(msg.get("content") or "", [t["function"]["name"] for t in tools], rnd)
            if calls:
                msg = {"role": "assistant", "content": None, "tool_calls": calls}
        if calls:
            events.append("call:" + ",".join(c["function"]["name"] + c["function"]["arguments"] for c in calls))
            try:
                outs = [run(c) for c in calls]
            except Exception as e:
                events.append(f"badargs:{e!r}")
                break
            if rnd == 0:
                first_ok = True
            messages.append({"role": "assistant", "content": msg.get("content"), "tool_calls": calls})
            for c, o in zip(calls, outs):
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": o})
            if task == "pages" and rnd == 2:
                final_ok = True
                break
        else:
            text = msg.get("content") or ""
            events.append("text:" + text.replace("\n", "\\n")[:140])
            if rnd > 0 and want and want.lower() in text.lower():
                final_ok = True
            break
    ok_first += first_ok
    ok_final += final_ok
    log.append(f"{i:2} first={int(first_ok)} final={int(final_ok)} " + " | ".join(events))
print("\n".join(log))
print(f"approach={approach} task={task}: first-turn call {ok_first}/{n}, complete {ok_final}/{n}, {time.time()-t0:.0f}s")

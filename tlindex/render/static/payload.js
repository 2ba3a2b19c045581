// A payload page of `tlindex report`: the page holds the payload's text, escaped; this colours it, numbers its
// lines (anchors L-1, L-2, ...) and pretty-prints JSON, in the browser, as highlight.py does on the server's page.
// Nothing is fetched: the report opens from file:// URLs. Without scripts, the page shows the text as it is.
(() => {
  const LIMIT = 2000000;  // above this, plain text (highlight.py's HIGHLIGHT_LIMIT)
  const words = (list) => "\\b(?:" + list.split(" ").sort((a, b) => b.length - a.length).join("|") + ")\\b";
  const DOUBLE = String.raw`"[^"\\\n]*(?:\\.[^"\\\n]*)*"?`;
  const SINGLE = String.raw`'[^'\\\n]*(?:\\.[^'\\\n]*)*'?`;
  const TRIPLE = String.raw`"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)`;
  const PY_WORDS = {};
  const add = (list, css) => list.split(" ").forEach((w) => { PY_WORDS[w] = css; });
  add("as assert async await break class continue def del elif else except finally for global if lambda nonlocal " +
      "pass raise return try while with yield", "k");
  add("abs all any bool bytes callable chr dict enumerate filter float getattr hasattr hash int isinstance " +
      "issubclass iter len list map max min next object open print range repr reversed round set setattr slice " +
      "sorted str sum super tuple type zip", "nb");
  add("import from", "kn");
  add("and or not in is", "ow");
  add("True False None", "kc");
  add("self cls", "bp");
  const CPP_TYPES = "auto bool char double float int long short signed unsigned void size_t int8_t int16_t " +
    "int32_t int64_t uint8_t uint16_t uint32_t uint64_t half bfloat16";
  const CPP_KEYWORDS = "break case catch class const constexpr continue default delete do else enum extern for " +
    "goto if inline namespace new operator private protected public return sizeof static static_cast " +
    "reinterpret_cast struct switch template this throw try typedef typename union using virtual volatile while " +
    "nullptr true false";
  const SCANNERS = {
    python: [String.raw`(?<c1>#[^\n]*)`, String.raw`(?<s>(?:\b[rRbBuUfF]{1,2})?(?:${TRIPLE}|${DOUBLE}|${SINGLE}))`,
      "(?<w>" + words(Object.keys(PY_WORDS).join(" ")) + ")", String.raw`(?<nd>@[A-Za-z_][\w.]*)`,
      String.raw`(?<m>\b(?:0[xX][0-9a-fA-F_]+|\d[\d_]*(?:\.[\d_]*)?(?:[eE][+-]?\d+)?j?))`],
    cpp: [String.raw`(?<c1>//[^\n]*)`, String.raw`(?<cm>/\*[\s\S]*?(?:\*/|$))`,
      String.raw`(?<cp>(?:^|(?<=\n))[ \t]*#[^\n]*)`, `(?<s>${DOUBLE}|${SINGLE})`, "(?<kt>" + words(CPP_TYPES) + ")",
      "(?<k>" + words(CPP_KEYWORDS) + ")",
      String.raw`(?<m>\b(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)[uUlLfF]*)`],
    json: [`(?<s>${DOUBLE})`, String.raw`(?<kc>\b(?:true|false|null)\b)`,
      String.raw`(?<m>-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)`],
  };
  const DEFINED = / +([A-Za-z_]\w*)/y;
  const escape = (text) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

  // JSON re-indented as Python's json.dumps(indent=2) lays it out, each value as it was logged.
  function pretty(text) {
    JSON.parse(text);  // throws on text that is not JSON: it is shown as it is
    const out = [];
    let depth = 0;
    const tokens = text.match(/"(?:[^"\\]|\\.)*"|[{}[\],:]|[^\s{}[\],:"]+/g) || [];
    const newline = () => "\n" + "  ".repeat(depth);
    tokens.forEach((token, i) => {
      if (token === "{" || token === "[") {
        const empty = tokens[i + 1] === (token === "{" ? "}" : "]");
        depth += 1;
        out.push(empty ? token : token + newline());
      } else if (token === "}" || token === "]") {
        depth -= 1;
        const opened = tokens[i - 1] === (token === "}" ? "{" : "[");
        out.push(opened ? token : newline() + token);
      } else if (token === ",") {
        out.push("," + newline());
      } else if (token === ":") {
        out.push(": ");
      } else {
        out.push(token);
      }
    });
    return out.join("");
  }

  function highlighted(text, lang) {
    const parts = SCANNERS[lang];
    text = escape(text);
    if (!parts || text.length > LIMIT) return text;
    const scanner = new RegExp(parts.join("|"), "g");
    const out = [];
    let at = 0;
    for (const found of text.matchAll(scanner)) {
      let start = found.index, token = found[0], end = start + token.length;
      if (start < at || start === end) continue;
      let css = Object.keys(found.groups).find((name) => found.groups[name] !== undefined);
      if (css === "w") {
        css = PY_WORDS[token];
        if (token === "def" || token === "class") {
          DEFINED.lastIndex = end;
          const defined = DEFINED.exec(text);
          if (defined) {
            out.push(text.slice(at, start), `<span class="k">${token}</span>`);
            at = end;
            start = end + defined[0].length - defined[1].length;
            end = start + defined[1].length;
            css = token === "def" ? "nf" : "nc";
            token = defined[1];
          }
        }
      } else if (css === "s") {
        const quote = token.replace(/^[rRbBuUfF]+/, "");
        css = quote.startsWith('"""') || quote.startsWith("'''") ? "sd" : quote[0] === '"' ? "s2" : "s1";
        if (lang === "json" && css === "s2" && text[end] === ":") css = "nt";
      } else if (css === "nd" && text.slice(text.lastIndexOf("\n", start - 1) + 1, start).trim()) {
        continue;  // @ as an operator (matrix multiply), not a decorator
      }
      if (token.includes("\n")) token = token.split("\n").join(`</span>\n<span class="${css}">`);
      out.push(text.slice(at, start), `<span class="${css}">${token}</span>`);
      at = end;
    }
    out.push(text.slice(at));
    return out.join("");
  }

  window.tlindexPayload = {highlighted, pretty};  // for the test that holds them to highlight.py's output
  const box = document.querySelector(".payload[data-lang]");
  if (!box) return;
  const pre = box.querySelector("pre");
  let text = pre.textContent, lang = box.dataset.lang;
  if (lang === "json") {
    try { text = pretty(text); } catch (error) { lang = "text"; }
  }
  const lines = highlighted(text, lang).split("\n");
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  if (!text) lines.pop();
  pre.innerHTML = lines.map((line, i) =>
    `<span id="L-${i + 1}"><a class="lineno" href="#L-${i + 1}">${i + 1}</a> ${line}</span>`).join("\n");
  const count = document.querySelector(".payload-lines");
  if (count) count.textContent = String(lines.length);
  const target = location.hash && document.getElementById(location.hash.slice(1));
  if (target) target.scrollIntoView();
})();

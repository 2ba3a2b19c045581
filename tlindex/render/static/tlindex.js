// tlindex pages: load folded stack-trie nodes on first open; expand or collapse the trie.
document.addEventListener("toggle", async (event) => {
  const details = event.target;
  if (!(details instanceof HTMLDetailsElement) || !details.open || !details.dataset.src) return;
  const url = details.dataset.src;
  delete details.dataset.src;
  const list = details.querySelector("ul.trie");
  try {
    const response = await fetch(url);
    list.innerHTML = response.ok ? await response.text() : "<li>could not load this part of the trie</li>";
  } catch (error) {
    list.innerHTML = "<li>could not load this part of the trie</li>";
  }
}, true);

document.addEventListener("click", (event) => {
  const button = event.target.closest("button.tl-expand");
  if (!button) return;
  const open = button.dataset.open === "1";
  document.querySelectorAll(".stack-trie details").forEach((d) => {
    if (!d.dataset.src) d.open = open;
  });
});

// Provenance page: highlight the lines a line is linked to in the other panes.
(() => {
  const data = document.getElementById("provenance-links");
  if (!data) return;
  const links = JSON.parse(data.textContent);
  const targets = (line) => {
    const pane = line.closest(".provenance-pane").dataset.pane;
    const linked = (links[pane] || {})[line.dataset.line] || {};
    return [line, ...Object.entries(linked).flatMap(([other, lines]) =>
      lines.map((n) => document.getElementById(`${other}-${n}`)).filter(Boolean))];
  };
  const clear = () => document.querySelectorAll(".provenance .hl").forEach((e) => e.classList.remove("hl"));
  document.querySelector(".provenance").addEventListener("mouseover", (event) => {
    const line = event.target.closest(".pl.linked");
    if (!line) return;
    clear();
    targets(line).forEach((e) => e.classList.add("hl"));
  });
  document.querySelector(".provenance").addEventListener("click", (event) => {
    const line = event.target.closest(".pl.linked");
    if (!line) return;
    clear();
    const found = targets(line);
    found.forEach((e) => e.classList.add("hl"));
    const seen = new Set([line.closest(".provenance-pane")]);
    found.forEach((e) => {
      const pane = e.closest(".provenance-pane");
      if (seen.has(pane)) return;
      seen.add(pane);
      // Scroll the other pane's own box only: the page and the clicked line stay where they are.
      const box = pane.querySelector("pre");
      box.scrollTop += e.getBoundingClientRect().top - box.getBoundingClientRect().top - box.clientHeight / 2;
    });
  });
})();

// Tables marked sortable: click a heading to sort by that column (numbers as numbers), again to reverse.
document.addEventListener("click", (event) => {
  const th = event.target.closest("table.sortable th");
  if (!th || event.target.closest("a")) return;  // a link in a heading (a glossary "?") is followed, not sorted on
  const table = th.closest("table");
  const body = table.tBodies[0];
  const column = Array.from(th.parentNode.children).indexOf(th);
  const descending = th.dataset.sorted !== "desc";
  table.querySelectorAll("th").forEach((h) => delete h.dataset.sorted);
  th.dataset.sorted = descending ? "desc" : "asc";
  const key = (row) => {
    const text = (row.children[column] || {}).textContent || "";
    const number = Number(text.replace(/,/g, "").trim());
    return text.trim() !== "" && !Number.isNaN(number) ? number : text.trim().toLowerCase();
  };
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    const order = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === "number" ? -1 : 1);
    return descending ? -order : order;
  });
  rows.forEach((row) => body.appendChild(row));
});

// Tree page: the filter box narrows the tree as you type, as the server's ?q= does (tlindex/pages/tree.py): an
// artifact stays when its path (run, compile, itself) holds every word; a compile when it or one of its artifacts
// does; a run when it or one of its compiles does. Words are lower-cased as SQLite does (A-Z only).
(() => {
  const box = document.querySelector("input.tl-tree-q");
  const tree = document.querySelector("ul.tl-tree");
  if (!box || !tree) return;
  const lower = (text) => text.replace(/[A-Z]/g, (c) => c.toLowerCase());
  const count = document.querySelector(".tl-tree-count");
  const plural = (n, word) => `${n.toLocaleString("en")} ${word}${n === 1 ? "" : "s"}`;
  // Folding (not <details>: Datasette closes every open <details> on a click elsewhere): without script, all shows.
  const fold = (item, folded) => {
    item.classList.toggle("tl-folded", folded);
    item.querySelector(":scope > .tl-fold").setAttribute("aria-expanded", folded ? "false" : "true");
  };
  tree.classList.add("tl-js");
  tree.querySelectorAll("li[data-open]").forEach((item) => fold(item, item.dataset.open !== "1"));
  tree.addEventListener("click", (event) => {
    const button = event.target.closest("button.tl-fold");
    if (button) fold(button.parentNode, !button.parentNode.classList.contains("tl-folded"));
  });
  const apply = () => {
    // an attempt ([0/1_2], 0/1_2) names its compile, as the server's filter reads it (tlindex.answers.names)
    const words = lower(box.value.slice(0, 200)).split(/\s+/).filter(Boolean).slice(0, 8)
      .map((word) => word.replace(/^(\[?!?\d+(?:\/\d+){1,2})_\d+(\]?)$/, "$1$2"));
    const has = (text) => words.every((word) => text.includes(word));
    const shown = { runs: 0, compiles: 0, artifacts: 0 };
    tree.querySelectorAll(":scope > li.tl-run").forEach((run) => {
      const runText = run.dataset.t;
      let kept = 0;
      run.querySelectorAll("li.tl-compile").forEach((compile) => {
        const path = `${runText}\n${compile.dataset.t}`;
        let artifacts = 0;
        compile.querySelectorAll("li.tl-artifact").forEach((artifact) => {
          artifact.hidden = !has(`${path}\n${artifact.dataset.t}`);
          artifacts += artifact.hidden ? 0 : 1;
        });
        compile.hidden = !(artifacts || has(path));
        fold(compile, words.length ? compile.hidden : compile.dataset.open !== "1");
        kept += compile.hidden ? 0 : 1;
        shown.artifacts += artifacts;
      });
      run.hidden = !(kept || has(runText));
      if (words.length && !run.hidden) fold(run, false);
      shown.runs += run.hidden ? 0 : 1;
      shown.compiles += kept;
    });
    if (count) {
      count.textContent = `${plural(shown.runs, "run")}, ${plural(shown.compiles, "compile")}, ` +
        `${plural(shown.artifacts, "artifact")}${words.length ? " listed here match" : " listed here"}`;
    }
  };
  box.addEventListener("input", apply);
})();

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

// The runs page of a server that takes uploads (tlindex serve --uploads): drop or choose a log, a .gz, an archive or
// a TORCH_TRACE folder; a folder is sent as one .tar, made here (a Blob of the files themselves: nothing is copied
// into memory); the upload's progress is shown, then its status is followed until its run's page can be opened.
(function () {
  "use strict";
  var form = document.querySelector("form.tlindex-upload");
  if (!form) return;
  var said = form.querySelector(".upload-said"), bar = form.querySelector("progress");
  var tokenInput = form.querySelector("input[name=token]"), chosen = null;
  var KEY = "tlindex-upload-token";
  try { tokenInput.value = sessionStorage.getItem(KEY) || ""; } catch (e) { /* no storage: typed each time */ }

  function say(text) { said.textContent = text; }

  function octal(number, width) {  // a tar header's number: octal digits, padded, then NUL
    var text = number.toString(8);
    while (text.length < width - 1) text = "0" + text;
    return text + "\0";
  }

  function header(name, size, mtime) {  // one ustar header block (names past 100 bytes split into prefix/name)
    var block = new Uint8Array(512), encoder = new TextEncoder();
    function put(text, at, width) { block.set(encoder.encode(text).slice(0, width), at); }
    var bytes = encoder.encode(name), prefix = "";
    if (bytes.length > 100) {
      var cut = name.lastIndexOf("/", 154);
      if (cut > 0) { prefix = name.slice(0, cut); name = name.slice(cut + 1); }
    }
    put(name, 0, 100); put("0000644\0", 100, 8); put("0000000\0", 108, 8); put("0000000\0", 116, 8);
    put(octal(size, 12), 124, 12); put(octal(Math.floor(mtime / 1000), 12), 136, 12);
    put("        ", 148, 8); put("0", 156, 1); put("ustar\0", 257, 6); put("00", 263, 2); put(prefix, 345, 155);
    var sum = 0;
    for (var i = 0; i < 512; i++) sum += block[i];
    put(octal(sum, 7) + " ", 148, 8);
    return block;
  }

  function tarOf(files) {  // [{path, file}] -> a Blob of a tar archive
    var parts = [];
    files.forEach(function (item) {
      parts.push(header(item.path, item.file.size, item.file.lastModified || Date.now()), item.file);
      var pad = (512 - item.file.size % 512) % 512;
      if (pad) parts.push(new Uint8Array(pad));
    });
    parts.push(new Uint8Array(1024));
    return new Blob(parts, {type: "application/x-tar"});
  }

  function entries(entry, path) {  // a dropped folder's files, as {path, file}
    return new Promise(function (resolve) {
      if (entry.isFile) {
        entry.file(function (file) { resolve([{path: path + entry.name, file: file}]); }, function () { resolve([]); });
        return;
      }
      var reader = entry.createReader(), all = [];
      (function next() {
        reader.readEntries(function (batch) {
          if (!batch.length) {
            Promise.all(all).then(function (lists) { resolve([].concat.apply([], lists)); });
            return;
          }
          batch.forEach(function (child) { all.push(entries(child, path + entry.name + "/")); });
          next();
        }, function () { resolve([]); });
      })();
    });
  }

  function choose(body, name) {
    chosen = {body: body, name: name};
    say(name + " (" + (body.size / 1e6).toFixed(1) + " MB): Upload sends it");
  }

  form.querySelector("input[name=file]").addEventListener("change", function (event) {
    var file = event.target.files[0];
    if (file) choose(file, file.name);
  });
  form.querySelector("input[name=folder]").addEventListener("change", function (event) {
    var files = Array.prototype.map.call(event.target.files, function (file) {
      return {path: file.webkitRelativePath || file.name, file: file};
    });
    if (files.length) choose(tarOf(files), (files[0].path.split("/")[0] || "trace") + ".tar");
  });
  form.addEventListener("dragover", function (event) { event.preventDefault(); form.classList.add("dragging"); });
  form.addEventListener("dragleave", function () { form.classList.remove("dragging"); });
  form.addEventListener("drop", function (event) {
    event.preventDefault();
    form.classList.remove("dragging");
    var item = event.dataTransfer.items && event.dataTransfer.items[0];
    var entry = item && item.webkitGetAsEntry && item.webkitGetAsEntry();
    if (entry && entry.isDirectory) {
      entries(entry, "").then(function (files) { if (files.length) choose(tarOf(files), entry.name + ".tar"); });
    } else if (event.dataTransfer.files[0]) {
      choose(event.dataTransfer.files[0], event.dataTransfer.files[0].name);
    }
  });

  function follow(statusUrl) {  // the upload's status, until it is done or failed
    fetch(statusUrl + ".json", {headers: {"Accept": "application/json"}}).then(function (response) {
      return response.json();
    }).then(function (status) {
      if (status.state === "done") { say("done: opening its run"); window.location = status.run_url; return; }
      if (status.state === "failed") { say("failed: " + status.error); return; }
      say(status.state + (status.progress ? ": " + (status.progress.bytes / 1e6).toFixed(1) + " of " +
          (status.progress.of / 1e6).toFixed(1) + " MB" : status.ahead ? ", " + status.ahead + " ahead" : "") + "…");
      setTimeout(function () { follow(statusUrl); }, 1000);
    }).catch(function () { setTimeout(function () { follow(statusUrl); }, 2000); });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (!chosen) { say("choose or drop a log first"); return; }
    var token = tokenInput.value.trim();
    try { sessionStorage.setItem(KEY, token); } catch (e) { /* kept for this page only */ }
    var label = form.querySelector("input[name=label]").value.trim();
    var url = form.dataset.url + "?name=" + encodeURIComponent(chosen.name) +
        (label ? "&label=" + encodeURIComponent(label) : "");
    var request = new XMLHttpRequest();
    request.open("POST", url);
    request.setRequestHeader("Authorization", "Bearer " + token);
    bar.hidden = false;
    request.upload.onprogress = function (progress) {
      if (progress.lengthComputable) { bar.max = progress.total; bar.value = progress.loaded; }
      say("uploading: " + (progress.loaded / 1e6).toFixed(1) + " MB");
    };
    request.onload = function () {
      var answer = {};
      try { answer = JSON.parse(request.responseText); } catch (e) { /* not JSON */ }
      if (request.status === 202 || request.status === 200) {
        say(answer.duplicate ? "posted before: following that upload" : "uploaded: waiting for its ingest");
        follow(answer.status_url);
      } else {
        say("refused (" + request.status + "): " + (answer.error || request.statusText));
      }
    };
    request.onerror = function () { say("the upload failed: the server could not be reached"); };
    request.send(chosen.body);
  });
})();

// Copy and "Insert as a new cell" for one answer or code block of the agent tree.
// Copy: the async clipboard (a click in a secure context: JupyterLab on https or localhost), else a
// hidden textarea and execCommand("copy"). Insert: a cell below the one whose output shows the tree,
// added to the notebook model that the widget manager works for (JupyterLab 4, Notebook 7); where
// there is none, the text is copied instead and the bar says so.
const WIDGET_MIME = "application/vnd.jupyter.widget-view+json";

async function copyText(text, el) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (_e) {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.cssText = "position:fixed;left:-9999px;top:0;opacity:0";
    el.appendChild(area);
    area.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch (_e2) { ok = false; }
    area.remove();
    return ok;
  }
}

function cellIndex(shared, el, anchor) {
  // The cell whose outputs hold the tree (its model id), else the cell around this element.
  const cells = shared.cells || [];
  for (let i = 0; anchor && i < cells.length; i++) {
    const outputs = typeof cells[i].getOutputs === "function" ? cells[i].getOutputs() : [];
    if (outputs.some(o => o && o.data && o.data[WIDGET_MIME] && o.data[WIDGET_MIME].model_id === anchor)) return i;
  }
  const cell = el.closest(".jp-Cell");
  const notebook = el.closest(".jp-Notebook");
  if (!cell || !notebook) return -1;
  return Array.from(notebook.querySelectorAll(".jp-Cell")).indexOf(cell);
}

function insertCell(model, el) {
  const manager = model.widget_manager;
  const notebook = manager && manager.context && manager.context.model;
  const shared = notebook && notebook.sharedModel;
  if (!shared || typeof shared.insertCell !== "function") return -1;
  const index = cellIndex(shared, el, model.get("anchor"));
  if (index < 0) return -1;
  shared.insertCell(index + 1, { cell_type: model.get("cell_type"), source: model.get("text") });
  return index + 1;
}

function button(label, title, cls) {
  const b = document.createElement("button");
  b.className = "jupyter-widgets jupyter-button widget-button " + cls;
  b.textContent = label;
  b.title = title;
  return b;
}

export default {
  render({ model, el }) {
    el.classList.add("agentstack-actions");
    const label = document.createElement("span");
    label.className = "agentstack-actions-label";
    const copy = button("Copy", "copy to the clipboard", "agentstack-copy");
    const insert = button("Insert as a new cell", "add it as a new cell below this one", "agentstack-insert");
    const status = document.createElement("span");
    status.className = "agentstack-actions-status";
    status.setAttribute("aria-live", "polite");
    let timer = null;
    const say = text => {
      status.textContent = text;
      clearTimeout(timer);
      timer = setTimeout(() => { status.textContent = ""; }, 4000);
    };
    copy.addEventListener("click", async () => {
      const ok = await copyText(model.get("text"), el);
      say(ok ? "copied" : "could not copy: select the text and press Ctrl+C");
    });
    insert.addEventListener("click", async () => {
      let at = -1;
      try { at = insertCell(model, el); } catch (_e) { at = -1; }
      if (at >= 0) { say(`inserted as cell ${at + 1}`); return; }
      const ok = await copyText(model.get("text"), el);
      say(ok ? "no notebook to insert into here: copied, paste it into a new cell" : "could not insert or copy");
    });
    const update = () => {
      label.textContent = model.get("label");
      label.style.display = model.get("label") ? "" : "none";
      insert.title = model.get("cell_type") === "markdown" ? "add it as a new Markdown cell below this one"
        : "add it as a new code cell below this one";
    };
    update();
    model.on("change:label", update);
    model.on("change:cell_type", update);
    el.append(label, copy, insert, status);
    return () => {
      clearTimeout(timer);
      model.off("change:label", update);
      model.off("change:cell_type", update);
    };
  },
};

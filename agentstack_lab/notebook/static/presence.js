// Tells the kernel when the tree's output is shown and when it leaves the page, and why: "cleared"
// (the cell's outputs were cleared or replaced: it was run again), "cell-deleted", or "closed" (the
// notebook itself went away: its kernel and runs go on). The kernel stops a run whose last view
// was cleared or deleted (notebook.rerun = stop) or keeps it to list it next time (keep).
export default {
  render({ model, el }) {
    let cell = null;
    let notebook = null;
    let tries = 0;
    const find = () => {
      cell = el.closest(".jp-Cell") || cell;
      notebook = el.closest(".jp-Notebook") || notebook;
      if (!notebook && tries++ < 50) requestAnimationFrame(find);
    };
    find();
    try { model.send({ event: "shown" }); } catch (_e) { /* the model is gone */ }
    return () => {
      setTimeout(() => {
        let how = "closed";
        if (notebook && notebook.isConnected) how = cell && cell.isConnected ? "cleared" : "cell-deleted";
        try { model.send({ event: "removed", how }); } catch (_e) { /* the kernel is gone */ }
      }, 0);
    };
  },
};

// The answer box: a textarea where Enter sends and Shift+Enter adds a line. The value travels with
// the submit message, so what was typed is what is sent, however fast Enter follows the typing.
export default {
  render({ model, el }) {
    const area = document.createElement("textarea");
    area.className = "agentstack-answer-input";
    area.rows = 2;
    area.placeholder = model.get("placeholder");
    area.value = model.get("value");
    area.setAttribute("aria-label", model.get("placeholder"));
    const grow = () => {
      area.style.height = "auto";
      area.style.height = Math.min(area.scrollHeight + 2, 240) + "px";
    };
    const typed = () => {
      model.set("value", area.value);
      model.save_changes();
      grow();
    };
    area.addEventListener("input", typed);
    area.addEventListener("keydown", event => {
      if (event.key !== "Enter" || event.isComposing) return;
      event.stopPropagation(); // neither Enter nor Shift+Enter is the notebook's "run cell" here
      event.preventDefault();
      if (event.shiftKey) { // a new line at the caret (the notebook would otherwise take Shift+Enter)
        area.setRangeText("\n", area.selectionStart, area.selectionEnd, "end");
        typed();
        return;
      }
      if (event.altKey || event.ctrlKey || event.metaKey) return;
      model.set("value", area.value);
      model.save_changes();
      model.send({ event: "submit", value: area.value });
    });
    const changed = () => {
      if (area.value !== model.get("value")) { area.value = model.get("value"); grow(); }
    };
    model.on("change:value", changed);
    el.classList.add("agentstack-answer-box-input");
    el.setAttribute("data-lm-suppress-shortcuts", "true"); // JupyterLab's shortcuts leave the box alone
    el.appendChild(area);
    return () => model.off("change:value", changed);
  },
};

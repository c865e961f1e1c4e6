"use strict";(self.rspackChunkagentstack_lab=self.rspackChunkagentstack_lab||[]).push([[700],{532(a,e,t){var o=t(763),r=t.n(o),n=t(700),c=(t.n(n))()(r());c.push([a.id,`/* Colours are JupyterLab theme variables only: text is a theme font colour on a theme layout
   colour; a status only tints a badge (18 % over the layout colour) and draws borders. */
.agentstack-panel { padding: 8px; overflow-y: auto; color: var(--jp-ui-font-color0);
  background: var(--jp-layout-color1); font-size: var(--jp-ui-font-size1); }
.agentstack-panel h2 { font-size: var(--jp-ui-font-size2); margin: 0 0 6px; }
.agentstack-panel h3 { font-size: var(--jp-ui-font-size1); margin: 12px 0 4px; color: var(--jp-ui-font-color0); }
.agentstack-panel .s-pending, .agentstack-snapshot .s-pending, .agentstack-panel .s-stopped,
.agentstack-snapshot .s-stopped { --agentstack-c: var(--jp-border-color1); }
.agentstack-panel .s-running, .agentstack-snapshot .s-running { --agentstack-c: var(--jp-brand-color1); }
.agentstack-panel .s-waiting_user, .agentstack-snapshot .s-waiting_user { --agentstack-c: var(--jp-warn-color0); }
.agentstack-panel .s-completed, .agentstack-snapshot .s-completed { --agentstack-c: var(--jp-success-color1); }
.agentstack-panel .s-failed, .agentstack-snapshot .s-failed { --agentstack-c: var(--jp-error-color1); }
.agentstack-badge { color: var(--jp-ui-font-color0); border: 1px solid var(--agentstack-c, var(--jp-border-color1));
  background: color-mix(in srgb, var(--agentstack-c, var(--jp-border-color1)) 18%, var(--jp-layout-color1));
  border-radius: 8px; padding: 0 6px; white-space: nowrap; }
.agentstack-muted { color: var(--jp-ui-font-color1); }
.agentstack-run { padding: 4px; border-bottom: 1px solid var(--jp-border-color2); cursor: pointer; }
.agentstack-run.selected { background: var(--jp-layout-color2); }
.agentstack-run-meta { font-size: var(--jp-ui-font-size0); }
.agentstack-decision { border: 1px solid var(--jp-warn-color0); border-radius: 4px; padding: 6px; margin: 4px 0;
  background: var(--jp-layout-color1); }
.agentstack-decision-prompt { margin: 4px 0; white-space: pre-wrap; }
.agentstack-decision-prompt .agentstack-prose { white-space: normal; }
.agentstack-decision-prompt .agentstack-prose > :first-child { margin-top: 0; }
.agentstack-decision-prompt .agentstack-prose > :last-child { margin-bottom: 0; }
.agentstack-panel pre.agentstack-code, .agentstack-code-edit { font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size); color: var(--jp-content-font-color1);
  background: var(--jp-cell-editor-background); border: 1px solid var(--jp-border-color2);
  padding: 4px; overflow-x: auto; max-height: 20em; width: 100%; box-sizing: border-box; }
.agentstack-answer { width: 100%; box-sizing: border-box; color: var(--jp-ui-font-color0);
  background: var(--jp-layout-color0); border: 1px solid var(--jp-border-color1); }
.agentstack-actions { display: flex; gap: 4px; flex-wrap: wrap; margin-top: 4px; }
.agentstack-tree-node, .agentstack-snapshot-node { border-left: 3px solid var(--agentstack-c, var(--jp-border-color1));
  padding-left: 6px; margin: 3px 0; }
/* Scoped to the panel and saved trees: the notebook's live tree has its own .agentstack-result (rendered
   Markdown, which pre-wrap would double-space) and draws it itself. */
.agentstack-panel .agentstack-result, .agentstack-snapshot .agentstack-result { color: var(--jp-content-font-color1);
  border-left: 4px solid var(--jp-success-color1); padding: 2px 8px; margin: 4px 0;
  background: color-mix(in srgb, var(--jp-success-color1) 8%, var(--jp-layout-color1)); }
.agentstack-panel .agentstack-error, .agentstack-snapshot .agentstack-error { white-space: pre-wrap;
  color: var(--jp-ui-font-color0); border-left: 3px solid var(--jp-error-color1); padding-left: 4px; }
.agentstack-panel .agentstack-prose, .agentstack-snapshot .agentstack-prose { white-space: normal; line-height: 1.45; }
/* code blocks sit on the plain layout colour: JupyterLab's syntax colours are made for it, not for a tint */
.agentstack-panel .agentstack-prose pre, .agentstack-snapshot .agentstack-prose pre { white-space: pre; overflow-x: auto;
  background: var(--jp-layout-color0); border: 1px solid var(--jp-border-color2); padding: 4px 6px; }
.agentstack-code-box { font-family: var(--jp-code-font-family), monospace; font-size: var(--jp-code-font-size);
  line-height: 1.4; white-space: pre; overflow: auto; margin: 2px 0; padding: 6px 8px; max-height: 32em;
  color: var(--jp-content-font-color1); background: var(--jp-cell-editor-background);
  border: 1px solid var(--jp-border-color2); border-radius: 2px; box-sizing: border-box; max-width: 100%; }
.agentstack-panel summary, .agentstack-snapshot summary { cursor: pointer; color: var(--jp-ui-font-color0); }
.agentstack-run-tool, .agentstack-qa-item { margin: 2px 0; }
.agentstack-run-tool > :not(summary), .agentstack-qa-item > div { margin-left: 1.2em; }
.agentstack-run-children { margin-left: 1.2em; }
.agentstack-run-prompt-full { white-space: pre-wrap; margin: 2px 0; }
.agentstack-failed-flag { color: var(--jp-ui-font-color0); border: 1px solid var(--jp-error-color1);
  background: color-mix(in srgb, var(--jp-error-color1) 14%, var(--jp-layout-color1)); border-radius: 8px;
  padding: 0 6px; font-size: 85%; white-space: nowrap; }
.agentstack-snapshot-node.agentstack-code-failed { border-left-color: var(--jp-error-color1); }
.agentstack-snapshot { color: var(--jp-ui-font-color0); font-size: var(--jp-ui-font-size1); }
.agentstack-snapshot-head { font-size: var(--jp-ui-font-size0); }
.agentstack-dry-run { border-left: 3px solid var(--jp-border-color1); padding: 2px 6px; margin: 4px 0;
  color: var(--jp-ui-font-color1); }
.agentstack-dry-run.clean { border-left-color: var(--jp-success-color1); }
.agentstack-dry-run.unclean { border-left-color: var(--jp-warn-color1); }
.agentstack-dry-run ul { margin: 2px 0 4px 16px; padding: 0; }
.agentstack-always { margin-top: 4px; padding: 4px; border: 1px solid var(--jp-border-color2); }
/* issue 27 items 12-15: the workspace line, the decision card's heading and code editors, run controls, filter */
.agentstack-workspace { margin: 0 0 6px; overflow-wrap: anywhere; }
.agentstack-decision-what { margin: 4px 0; }
.agentstack-decision-run { margin: 2px 0; overflow-wrap: anywhere; }
.agentstack-code-view, .agentstack-code-edit { border: 1px solid var(--jp-border-color2); margin: 4px 0;
  background: var(--jp-cell-editor-background); max-height: 24em; overflow: auto; min-width: 0; }
.agentstack-code-edit { border-color: var(--jp-brand-color1); min-height: 6em; }
.agentstack-code-view .cm-editor, .agentstack-code-edit .cm-editor { font-size: var(--jp-code-font-size);
  color: var(--jp-content-font-color1); }
.agentstack-code-edit textarea.agentstack-code-plain { width: 100%; box-sizing: border-box;
  font-family: var(--jp-code-font-family); }
.agentstack-filter-bar { display: flex; gap: 4px; flex-wrap: wrap; margin: 0 0 4px; }
.agentstack-filter-bar .agentstack-search { flex: 1 1 10em; min-width: 0; }
.agentstack-panel select.agentstack-filter, .agentstack-panel input.agentstack-search {
  color: var(--jp-ui-font-color0); background: var(--jp-layout-color0); border: 1px solid var(--jp-border-color1); }
.agentstack-run-controls button { padding: 0 6px; min-height: 22px; }
.agentstack-comment { width: 100%; box-sizing: border-box; margin-top: 4px; color: var(--jp-ui-font-color0);
  background: var(--jp-layout-color0); border: 1px solid var(--jp-border-color1); }
.agentstack-panel a.agentstack-open-cell { color: var(--jp-content-link-color); text-decoration: underline; }
.agentstack-run-meta { overflow-wrap: anywhere; }
.agentstack-panel .agentstack-actions button { height: auto; min-height: 24px; white-space: normal; max-width: 100%;
  line-height: 1.4; padding: 3px 8px; }
`,""]),t.d(e,{},{A:c})},700(a){a.exports=function(a){var e=[];return e.toString=function(){return this.map(function(e){var t="",o=void 0!==e[5];return e[4]&&(t+="@supports (".concat(e[4],") {")),e[2]&&(t+="@media ".concat(e[2]," {")),o&&(t+="@layer".concat(e[5].length>0?" ".concat(e[5]):""," {")),t+=a(e),o&&(t+="}"),e[2]&&(t+="}"),e[4]&&(t+="}"),t}).join("")},e.i=function(a,t,o,r,n){"string"==typeof a&&(a=[[null,a,void 0]]);var c={};if(o)for(var s=0;s<this.length;s++){var p=this[s][0];null!=p&&(c[p]=!0)}for(var i=0;i<a.length;i++){var l=[].concat(a[i]);o&&c[l[0]]||(void 0!==n&&(void 0===l[5]||(l[1]="@layer".concat(l[5].length>0?" ".concat(l[5]):""," {").concat(l[1],"}")),l[5]=n),t&&(l[2]&&(l[1]="@media ".concat(l[2]," {").concat(l[1],"}")),l[2]=t),r&&(l[4]?(l[1]="@supports (".concat(l[4],") {").concat(l[1],"}"),l[4]=r):l[4]="".concat(r)),e.push(l))}},e}},763(a){a.exports=function(a){return a[1]}},658(a){var e=[];function t(a){for(var t=-1,o=0;o<e.length;o++)if(e[o].identifier===a){t=o;break}return t}function o(a,o){for(var r={},n=[],c=0;c<a.length;c++){var s=a[c],p=o.base?s[0]+o.base:s[0],i=r[p]||0,l="".concat(p," ").concat(i);r[p]=i+1;var d=t(l),g={css:s[1],media:s[2],sourceMap:s[3],supports:s[4],layer:s[5]};if(-1!==d)e[d].references++,e[d].updater(g);else{var u=function(a,e){var t=e.domAPI(e);return t.update(a),function(e){e?(e.css!==a.css||e.media!==a.media||e.sourceMap!==a.sourceMap||e.supports!==a.supports||e.layer!==a.layer)&&t.update(a=e):t.remove()}}(g,o);o.byIndex=c,e.splice(c,0,{identifier:l,updater:u,references:1})}n.push(l)}return n}a.exports=function(a,r){var n=o(a=a||[],r=r||{});return function(a){a=a||[];for(var c=0;c<n.length;c++){var s=t(n[c]);e[s].references--}for(var p=o(a,r),i=0;i<n.length;i++){var l=t(n[i]);0===e[l].references&&(e[l].updater(),e.splice(l,1))}n=p}}},713(a){var e={};a.exports=function(a,t){var o=function(a){if(void 0===e[a]){var t=document.querySelector(a);if(window.HTMLIFrameElement&&t instanceof window.HTMLIFrameElement)try{t=t.contentDocument.head}catch(a){t=null}e[a]=t}return e[a]}(a);if(!o)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");o.appendChild(t)}},486(a){a.exports=function(a){var e=document.createElement("style");return a.setAttributes(e,a.attributes),a.insert(e,a.options),e}},850(a,e,t){a.exports=function(a){var e=t.nc;e&&a.setAttribute("nonce",e)}},947(a){a.exports=function(a){if("u"<typeof document)return{update:function(){},remove:function(){}};var e=a.insertStyleElement(a);return{update:function(t){var o,r,n;o="",t.supports&&(o+="@supports (".concat(t.supports,") {")),t.media&&(o+="@media ".concat(t.media," {")),(r=void 0!==t.layer)&&(o+="@layer".concat(t.layer.length>0?" ".concat(t.layer):""," {")),o+=t.css,r&&(o+="}"),t.media&&(o+="}"),t.supports&&(o+="}"),(n=t.sourceMap)&&"u">typeof btoa&&(o+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),a.styleTagTransform(o,e,a.options)},remove:function(){var a;null===(a=e).parentNode||a.parentNode.removeChild(a)}}}},147(a){a.exports=function(a,e){if(e.styleSheet)e.styleSheet.cssText=a;else{for(;e.firstChild;)e.removeChild(e.firstChild);e.appendChild(document.createTextNode(a))}}},959(a,e,t){var o=t(658),r=t.n(o),n=t(947),c=t.n(n),s=t(713),p=t.n(s),i=t(850),l=t.n(i),d=t(486),g=t.n(d),u=t(147),f=t.n(u),k=t(532),v={};v.styleTagTransform=f(),v.setAttributes=l(),v.insert=p().bind(null,"head"),v.domAPI=c(),v.insertStyleElement=g(),r()(k.A,v),k.A&&k.A.locals&&k.A.locals}}]);
"use strict";(self.rspackChunkagentstack_lab=self.rspackChunkagentstack_lab||[]).push([[700],{646(a,r,e){var o=e(601),t=e.n(o),n=e(314),s=(e.n(n))()(t());s.push([a.id,`/* Colours are JupyterLab theme variables only: text is a theme font colour on a theme layout
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
`,""]),e.d(r,{},{A:s})},314(a){a.exports=function(a){var r=[];return r.toString=function(){return this.map(function(r){var e="",o=void 0!==r[5];return r[4]&&(e+="@supports (".concat(r[4],") {")),r[2]&&(e+="@media ".concat(r[2]," {")),o&&(e+="@layer".concat(r[5].length>0?" ".concat(r[5]):""," {")),e+=a(r),o&&(e+="}"),r[2]&&(e+="}"),r[4]&&(e+="}"),e}).join("")},r.i=function(a,e,o,t,n){"string"==typeof a&&(a=[[null,a,void 0]]);var s={};if(o)for(var c=0;c<this.length;c++){var p=this[c][0];null!=p&&(s[p]=!0)}for(var i=0;i<a.length;i++){var l=[].concat(a[i]);o&&s[l[0]]||(void 0!==n&&(void 0===l[5]||(l[1]="@layer".concat(l[5].length>0?" ".concat(l[5]):""," {").concat(l[1],"}")),l[5]=n),e&&(l[2]&&(l[1]="@media ".concat(l[2]," {").concat(l[1],"}")),l[2]=e),t&&(l[4]?(l[1]="@supports (".concat(l[4],") {").concat(l[1],"}"),l[4]=t):l[4]="".concat(t)),r.push(l))}},r}},601(a){a.exports=function(a){return a[1]}},72(a){var r=[];function e(a){for(var e=-1,o=0;o<r.length;o++)if(r[o].identifier===a){e=o;break}return e}function o(a,o){for(var t={},n=[],s=0;s<a.length;s++){var c=a[s],p=o.base?c[0]+o.base:c[0],i=t[p]||0,l="".concat(p," ").concat(i);t[p]=i+1;var d=e(l),u={css:c[1],media:c[2],sourceMap:c[3],supports:c[4],layer:c[5]};if(-1!==d)r[d].references++,r[d].updater(u);else{var g=function(a,r){var e=r.domAPI(r);return e.update(a),function(r){r?(r.css!==a.css||r.media!==a.media||r.sourceMap!==a.sourceMap||r.supports!==a.supports||r.layer!==a.layer)&&e.update(a=r):e.remove()}}(u,o);o.byIndex=s,r.splice(s,0,{identifier:l,updater:g,references:1})}n.push(l)}return n}a.exports=function(a,t){var n=o(a=a||[],t=t||{});return function(a){a=a||[];for(var s=0;s<n.length;s++){var c=e(n[s]);r[c].references--}for(var p=o(a,t),i=0;i<n.length;i++){var l=e(n[i]);0===r[l].references&&(r[l].updater(),r.splice(l,1))}n=p}}},659(a){var r={};a.exports=function(a,e){var o=function(a){if(void 0===r[a]){var e=document.querySelector(a);if(window.HTMLIFrameElement&&e instanceof window.HTMLIFrameElement)try{e=e.contentDocument.head}catch(a){e=null}r[a]=e}return r[a]}(a);if(!o)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");o.appendChild(e)}},540(a){a.exports=function(a){var r=document.createElement("style");return a.setAttributes(r,a.attributes),a.insert(r,a.options),r}},56(a,r,e){a.exports=function(a){var r=e.nc;r&&a.setAttribute("nonce",r)}},206(a){a.exports=function(a){if("u"<typeof document)return{update:function(){},remove:function(){}};var r=a.insertStyleElement(a);return{update:function(e){var o,t,n;o="",e.supports&&(o+="@supports (".concat(e.supports,") {")),e.media&&(o+="@media ".concat(e.media," {")),(t=void 0!==e.layer)&&(o+="@layer".concat(e.layer.length>0?" ".concat(e.layer):""," {")),o+=e.css,t&&(o+="}"),e.media&&(o+="}"),e.supports&&(o+="}"),(n=e.sourceMap)&&"u">typeof btoa&&(o+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),a.styleTagTransform(o,r,a.options)},remove:function(){var a;null===(a=r).parentNode||a.parentNode.removeChild(a)}}}},113(a){a.exports=function(a,r){if(r.styleSheet)r.styleSheet.cssText=a;else{for(;r.firstChild;)r.removeChild(r.firstChild);r.appendChild(document.createTextNode(a))}}},959(a,r,e){var o=e(72),t=e.n(o),n=e(206),s=e.n(n),c=e(659),p=e.n(c),i=e(56),l=e.n(i),d=e(540),u=e.n(d),g=e(113),f=e.n(g),v=e(646),k={};k.styleTagTransform=f(),k.setAttributes=l(),k.insert=p().bind(null,"head"),k.domAPI=s(),k.insertStyleElement=u(),t()(v.A,k),v.A&&v.A.locals&&v.A.locals}}]);
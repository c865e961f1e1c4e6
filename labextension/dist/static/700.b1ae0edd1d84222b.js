"use strict";(self.rspackChunkagentstack_lab=self.rspackChunkagentstack_lab||[]).push([[700],{646(a,e,r){var t=r(601),o=r.n(t),n=r(314),c=(r.n(n))()(o());c.push([a.id,`/* Colours are JupyterLab theme variables only: text is a theme font colour on a theme layout
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
.agentstack-result { white-space: pre-wrap; color: var(--jp-content-font-color1); }
.agentstack-error { white-space: pre-wrap; color: var(--jp-ui-font-color0);
  border-left: 3px solid var(--jp-error-color1); padding-left: 4px; }
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
`,""]),r.d(e,{},{A:c})},314(a){a.exports=function(a){var e=[];return e.toString=function(){return this.map(function(e){var r="",t=void 0!==e[5];return e[4]&&(r+="@supports (".concat(e[4],") {")),e[2]&&(r+="@media ".concat(e[2]," {")),t&&(r+="@layer".concat(e[5].length>0?" ".concat(e[5]):""," {")),r+=a(e),t&&(r+="}"),e[2]&&(r+="}"),e[4]&&(r+="}"),r}).join("")},e.i=function(a,r,t,o,n){"string"==typeof a&&(a=[[null,a,void 0]]);var c={};if(t)for(var s=0;s<this.length;s++){var i=this[s][0];null!=i&&(c[i]=!0)}for(var p=0;p<a.length;p++){var l=[].concat(a[p]);t&&c[l[0]]||(void 0!==n&&(void 0===l[5]||(l[1]="@layer".concat(l[5].length>0?" ".concat(l[5]):""," {").concat(l[1],"}")),l[5]=n),r&&(l[2]&&(l[1]="@media ".concat(l[2]," {").concat(l[1],"}")),l[2]=r),o&&(l[4]?(l[1]="@supports (".concat(l[4],") {").concat(l[1],"}"),l[4]=o):l[4]="".concat(o)),e.push(l))}},e}},601(a){a.exports=function(a){return a[1]}},72(a){var e=[];function r(a){for(var r=-1,t=0;t<e.length;t++)if(e[t].identifier===a){r=t;break}return r}function t(a,t){for(var o={},n=[],c=0;c<a.length;c++){var s=a[c],i=t.base?s[0]+t.base:s[0],p=o[i]||0,l="".concat(i," ").concat(p);o[i]=p+1;var d=r(l),u={css:s[1],media:s[2],sourceMap:s[3],supports:s[4],layer:s[5]};if(-1!==d)e[d].references++,e[d].updater(u);else{var g=function(a,e){var r=e.domAPI(e);return r.update(a),function(e){e?(e.css!==a.css||e.media!==a.media||e.sourceMap!==a.sourceMap||e.supports!==a.supports||e.layer!==a.layer)&&r.update(a=e):r.remove()}}(u,t);t.byIndex=c,e.splice(c,0,{identifier:l,updater:g,references:1})}n.push(l)}return n}a.exports=function(a,o){var n=t(a=a||[],o=o||{});return function(a){a=a||[];for(var c=0;c<n.length;c++){var s=r(n[c]);e[s].references--}for(var i=t(a,o),p=0;p<n.length;p++){var l=r(n[p]);0===e[l].references&&(e[l].updater(),e.splice(l,1))}n=i}}},659(a){var e={};a.exports=function(a,r){var t=function(a){if(void 0===e[a]){var r=document.querySelector(a);if(window.HTMLIFrameElement&&r instanceof window.HTMLIFrameElement)try{r=r.contentDocument.head}catch(a){r=null}e[a]=r}return e[a]}(a);if(!t)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");t.appendChild(r)}},540(a){a.exports=function(a){var e=document.createElement("style");return a.setAttributes(e,a.attributes),a.insert(e,a.options),e}},56(a,e,r){a.exports=function(a){var e=r.nc;e&&a.setAttribute("nonce",e)}},825(a){a.exports=function(a){if("u"<typeof document)return{update:function(){},remove:function(){}};var e=a.insertStyleElement(a);return{update:function(r){var t,o,n;t="",r.supports&&(t+="@supports (".concat(r.supports,") {")),r.media&&(t+="@media ".concat(r.media," {")),(o=void 0!==r.layer)&&(t+="@layer".concat(r.layer.length>0?" ".concat(r.layer):""," {")),t+=r.css,o&&(t+="}"),r.media&&(t+="}"),r.supports&&(t+="}"),(n=r.sourceMap)&&"u">typeof btoa&&(t+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),a.styleTagTransform(t,e,a.options)},remove:function(){var a;null===(a=e).parentNode||a.parentNode.removeChild(a)}}}},113(a){a.exports=function(a,e){if(e.styleSheet)e.styleSheet.cssText=a;else{for(;e.firstChild;)e.removeChild(e.firstChild);e.appendChild(document.createTextNode(a))}}},959(a,e,r){var t=r(72),o=r.n(t),n=r(825),c=r.n(n),s=r(659),i=r.n(s),p=r(56),l=r.n(p),d=r(540),u=r.n(d),g=r(113),f=r.n(g),v=r(646),k={};k.styleTagTransform=f(),k.setAttributes=l(),k.insert=i().bind(null,"head"),k.domAPI=c(),k.insertStyleElement=u(),o()(v.A,k),v.A&&v.A.locals&&v.A.locals}}]);
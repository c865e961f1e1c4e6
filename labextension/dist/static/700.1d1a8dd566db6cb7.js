"use strict";(self.rspackChunkagentstack_lab=self.rspackChunkagentstack_lab||[]).push([[700],{646(a,e,t){var r=t(601),o=t.n(r),n=t(314),c=(t.n(n))()(o());c.push([a.id,`/* Colours are JupyterLab theme variables only: text is a theme font colour on a theme layout
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
.agentstack-panel .agentstack-actions button { height: auto; min-height: 24px; white-space: normal; max-width: 100%;
  line-height: 1.4; padding: 3px 8px; }
`,""]),t.d(e,{},{A:c})},314(a){a.exports=function(a){var e=[];return e.toString=function(){return this.map(function(e){var t="",r=void 0!==e[5];return e[4]&&(t+="@supports (".concat(e[4],") {")),e[2]&&(t+="@media ".concat(e[2]," {")),r&&(t+="@layer".concat(e[5].length>0?" ".concat(e[5]):""," {")),t+=a(e),r&&(t+="}"),e[2]&&(t+="}"),e[4]&&(t+="}"),t}).join("")},e.i=function(a,t,r,o,n){"string"==typeof a&&(a=[[null,a,void 0]]);var c={};if(r)for(var s=0;s<this.length;s++){var i=this[s][0];null!=i&&(c[i]=!0)}for(var p=0;p<a.length;p++){var l=[].concat(a[p]);r&&c[l[0]]||(void 0!==n&&(void 0===l[5]||(l[1]="@layer".concat(l[5].length>0?" ".concat(l[5]):""," {").concat(l[1],"}")),l[5]=n),t&&(l[2]&&(l[1]="@media ".concat(l[2]," {").concat(l[1],"}")),l[2]=t),o&&(l[4]?(l[1]="@supports (".concat(l[4],") {").concat(l[1],"}"),l[4]=o):l[4]="".concat(o)),e.push(l))}},e}},601(a){a.exports=function(a){return a[1]}},72(a){var e=[];function t(a){for(var t=-1,r=0;r<e.length;r++)if(e[r].identifier===a){t=r;break}return t}function r(a,r){for(var o={},n=[],c=0;c<a.length;c++){var s=a[c],i=r.base?s[0]+r.base:s[0],p=o[i]||0,l="".concat(i," ").concat(p);o[i]=p+1;var d=t(l),u={css:s[1],media:s[2],sourceMap:s[3],supports:s[4],layer:s[5]};if(-1!==d)e[d].references++,e[d].updater(u);else{var g=function(a,e){var t=e.domAPI(e);return t.update(a),function(e){e?(e.css!==a.css||e.media!==a.media||e.sourceMap!==a.sourceMap||e.supports!==a.supports||e.layer!==a.layer)&&t.update(a=e):t.remove()}}(u,r);r.byIndex=c,e.splice(c,0,{identifier:l,updater:g,references:1})}n.push(l)}return n}a.exports=function(a,o){var n=r(a=a||[],o=o||{});return function(a){a=a||[];for(var c=0;c<n.length;c++){var s=t(n[c]);e[s].references--}for(var i=r(a,o),p=0;p<n.length;p++){var l=t(n[p]);0===e[l].references&&(e[l].updater(),e.splice(l,1))}n=i}}},659(a){var e={};a.exports=function(a,t){var r=function(a){if(void 0===e[a]){var t=document.querySelector(a);if(window.HTMLIFrameElement&&t instanceof window.HTMLIFrameElement)try{t=t.contentDocument.head}catch(a){t=null}e[a]=t}return e[a]}(a);if(!r)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");r.appendChild(t)}},540(a){a.exports=function(a){var e=document.createElement("style");return a.setAttributes(e,a.attributes),a.insert(e,a.options),e}},56(a,e,t){a.exports=function(a){var e=t.nc;e&&a.setAttribute("nonce",e)}},825(a){a.exports=function(a){if("u"<typeof document)return{update:function(){},remove:function(){}};var e=a.insertStyleElement(a);return{update:function(t){var r,o,n;r="",t.supports&&(r+="@supports (".concat(t.supports,") {")),t.media&&(r+="@media ".concat(t.media," {")),(o=void 0!==t.layer)&&(r+="@layer".concat(t.layer.length>0?" ".concat(t.layer):""," {")),r+=t.css,o&&(r+="}"),t.media&&(r+="}"),t.supports&&(r+="}"),(n=t.sourceMap)&&"u">typeof btoa&&(r+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),a.styleTagTransform(r,e,a.options)},remove:function(){var a;null===(a=e).parentNode||a.parentNode.removeChild(a)}}}},113(a){a.exports=function(a,e){if(e.styleSheet)e.styleSheet.cssText=a;else{for(;e.firstChild;)e.removeChild(e.firstChild);e.appendChild(document.createTextNode(a))}}},959(a,e,t){var r=t(72),o=t.n(r),n=t(825),c=t.n(n),s=t(659),i=t.n(s),p=t(56),l=t.n(p),d=t(540),u=t.n(d),g=t(113),f=t.n(g),v=t(646),k={};k.styleTagTransform=f(),k.setAttributes=l(),k.insert=i().bind(null,"head"),k.domAPI=c(),k.insertStyleElement=u(),o()(v.A,k),v.A&&v.A.locals&&v.A.locals}}]);
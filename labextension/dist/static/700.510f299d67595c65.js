"use strict";(self.rspackChunkagentstack_lab=self.rspackChunkagentstack_lab||[]).push([[700],{532(r,a,e){var t=e(763),o=e.n(t),n=e(700),s=(e.n(n))()(o());s.push([r.id,`/* Colours are JupyterLab theme variables only: text is a theme font colour on a theme layout
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
`,""]),e.d(a,{},{A:s})},700(r){r.exports=function(r){var a=[];return a.toString=function(){return this.map(function(a){var e="",t=void 0!==a[5];return a[4]&&(e+="@supports (".concat(a[4],") {")),a[2]&&(e+="@media ".concat(a[2]," {")),t&&(e+="@layer".concat(a[5].length>0?" ".concat(a[5]):""," {")),e+=r(a),t&&(e+="}"),a[2]&&(e+="}"),a[4]&&(e+="}"),e}).join("")},a.i=function(r,e,t,o,n){"string"==typeof r&&(r=[[null,r,void 0]]);var s={};if(t)for(var c=0;c<this.length;c++){var p=this[c][0];null!=p&&(s[p]=!0)}for(var i=0;i<r.length;i++){var l=[].concat(r[i]);t&&s[l[0]]||(void 0!==n&&(void 0===l[5]||(l[1]="@layer".concat(l[5].length>0?" ".concat(l[5]):""," {").concat(l[1],"}")),l[5]=n),e&&(l[2]&&(l[1]="@media ".concat(l[2]," {").concat(l[1],"}")),l[2]=e),o&&(l[4]?(l[1]="@supports (".concat(l[4],") {").concat(l[1],"}"),l[4]=o):l[4]="".concat(o)),a.push(l))}},a}},763(r){r.exports=function(r){return r[1]}},658(r){var a=[];function e(r){for(var e=-1,t=0;t<a.length;t++)if(a[t].identifier===r){e=t;break}return e}function t(r,t){for(var o={},n=[],s=0;s<r.length;s++){var c=r[s],p=t.base?c[0]+t.base:c[0],i=o[p]||0,l="".concat(p," ").concat(i);o[p]=i+1;var d=e(l),u={css:c[1],media:c[2],sourceMap:c[3],supports:c[4],layer:c[5]};if(-1!==d)a[d].references++,a[d].updater(u);else{var g=function(r,a){var e=a.domAPI(a);return e.update(r),function(a){a?(a.css!==r.css||a.media!==r.media||a.sourceMap!==r.sourceMap||a.supports!==r.supports||a.layer!==r.layer)&&e.update(r=a):e.remove()}}(u,t);t.byIndex=s,a.splice(s,0,{identifier:l,updater:g,references:1})}n.push(l)}return n}r.exports=function(r,o){var n=t(r=r||[],o=o||{});return function(r){r=r||[];for(var s=0;s<n.length;s++){var c=e(n[s]);a[c].references--}for(var p=t(r,o),i=0;i<n.length;i++){var l=e(n[i]);0===a[l].references&&(a[l].updater(),a.splice(l,1))}n=p}}},713(r){var a={};r.exports=function(r,e){var t=function(r){if(void 0===a[r]){var e=document.querySelector(r);if(window.HTMLIFrameElement&&e instanceof window.HTMLIFrameElement)try{e=e.contentDocument.head}catch(r){e=null}a[r]=e}return a[r]}(r);if(!t)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");t.appendChild(e)}},486(r){r.exports=function(r){var a=document.createElement("style");return r.setAttributes(a,r.attributes),r.insert(a,r.options),a}},850(r,a,e){r.exports=function(r){var a=e.nc;a&&r.setAttribute("nonce",a)}},947(r){r.exports=function(r){if("u"<typeof document)return{update:function(){},remove:function(){}};var a=r.insertStyleElement(r);return{update:function(e){var t,o,n;t="",e.supports&&(t+="@supports (".concat(e.supports,") {")),e.media&&(t+="@media ".concat(e.media," {")),(o=void 0!==e.layer)&&(t+="@layer".concat(e.layer.length>0?" ".concat(e.layer):""," {")),t+=e.css,o&&(t+="}"),e.media&&(t+="}"),e.supports&&(t+="}"),(n=e.sourceMap)&&"u">typeof btoa&&(t+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),r.styleTagTransform(t,a,r.options)},remove:function(){var r;null===(r=a).parentNode||r.parentNode.removeChild(r)}}}},147(r){r.exports=function(r,a){if(a.styleSheet)a.styleSheet.cssText=r;else{for(;a.firstChild;)a.removeChild(a.firstChild);a.appendChild(document.createTextNode(r))}}},959(r,a,e){var t=e(658),o=e.n(t),n=e(947),s=e.n(n),c=e(713),p=e.n(c),i=e(850),l=e.n(i),d=e(486),u=e.n(d),g=e(147),f=e.n(g),v=e(532),k={};k.styleTagTransform=f(),k.setAttributes=l(),k.insert=p().bind(null,"head"),k.domAPI=s(),k.insertStyleElement=u(),o()(v.A,k),v.A&&v.A.locals&&v.A.locals}}]);
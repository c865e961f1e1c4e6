"use strict";(self.rspackChunkagentstack_lab=self.rspackChunkagentstack_lab||[]).push([[700],{646(t,e,a){var r=a(601),o=a.n(r),n=a(314),s=(a.n(n))()(o());s.push([t.id,`/* Colours are JupyterLab theme variables only: text is a theme font colour on a theme layout
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
`,""]),a.d(e,{},{A:s})},314(t){t.exports=function(t){var e=[];return e.toString=function(){return this.map(function(e){var a="",r=void 0!==e[5];return e[4]&&(a+="@supports (".concat(e[4],") {")),e[2]&&(a+="@media ".concat(e[2]," {")),r&&(a+="@layer".concat(e[5].length>0?" ".concat(e[5]):""," {")),a+=t(e),r&&(a+="}"),e[2]&&(a+="}"),e[4]&&(a+="}"),a}).join("")},e.i=function(t,a,r,o,n){"string"==typeof t&&(t=[[null,t,void 0]]);var s={};if(r)for(var c=0;c<this.length;c++){var i=this[c][0];null!=i&&(s[i]=!0)}for(var p=0;p<t.length;p++){var l=[].concat(t[p]);r&&s[l[0]]||(void 0!==n&&(void 0===l[5]||(l[1]="@layer".concat(l[5].length>0?" ".concat(l[5]):""," {").concat(l[1],"}")),l[5]=n),a&&(l[2]&&(l[1]="@media ".concat(l[2]," {").concat(l[1],"}")),l[2]=a),o&&(l[4]?(l[1]="@supports (".concat(l[4],") {").concat(l[1],"}"),l[4]=o):l[4]="".concat(o)),e.push(l))}},e}},601(t){t.exports=function(t){return t[1]}},72(t){var e=[];function a(t){for(var a=-1,r=0;r<e.length;r++)if(e[r].identifier===t){a=r;break}return a}function r(t,r){for(var o={},n=[],s=0;s<t.length;s++){var c=t[s],i=r.base?c[0]+r.base:c[0],p=o[i]||0,l="".concat(i," ").concat(p);o[i]=p+1;var d=a(l),u={css:c[1],media:c[2],sourceMap:c[3],supports:c[4],layer:c[5]};if(-1!==d)e[d].references++,e[d].updater(u);else{var f=function(t,e){var a=e.domAPI(e);return a.update(t),function(e){e?(e.css!==t.css||e.media!==t.media||e.sourceMap!==t.sourceMap||e.supports!==t.supports||e.layer!==t.layer)&&a.update(t=e):a.remove()}}(u,r);r.byIndex=s,e.splice(s,0,{identifier:l,updater:f,references:1})}n.push(l)}return n}t.exports=function(t,o){var n=r(t=t||[],o=o||{});return function(t){t=t||[];for(var s=0;s<n.length;s++){var c=a(n[s]);e[c].references--}for(var i=r(t,o),p=0;p<n.length;p++){var l=a(n[p]);0===e[l].references&&(e[l].updater(),e.splice(l,1))}n=i}}},659(t){var e={};t.exports=function(t,a){var r=function(t){if(void 0===e[t]){var a=document.querySelector(t);if(window.HTMLIFrameElement&&a instanceof window.HTMLIFrameElement)try{a=a.contentDocument.head}catch(t){a=null}e[t]=a}return e[t]}(t);if(!r)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");r.appendChild(a)}},540(t){t.exports=function(t){var e=document.createElement("style");return t.setAttributes(e,t.attributes),t.insert(e,t.options),e}},56(t,e,a){t.exports=function(t){var e=a.nc;e&&t.setAttribute("nonce",e)}},206(t){t.exports=function(t){if("u"<typeof document)return{update:function(){},remove:function(){}};var e=t.insertStyleElement(t);return{update:function(a){var r,o,n;r="",a.supports&&(r+="@supports (".concat(a.supports,") {")),a.media&&(r+="@media ".concat(a.media," {")),(o=void 0!==a.layer)&&(r+="@layer".concat(a.layer.length>0?" ".concat(a.layer):""," {")),r+=a.css,o&&(r+="}"),a.media&&(r+="}"),a.supports&&(r+="}"),(n=a.sourceMap)&&"u">typeof btoa&&(r+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),t.styleTagTransform(r,e,t.options)},remove:function(){var t;null===(t=e).parentNode||t.parentNode.removeChild(t)}}}},113(t){t.exports=function(t,e){if(e.styleSheet)e.styleSheet.cssText=t;else{for(;e.firstChild;)e.removeChild(e.firstChild);e.appendChild(document.createTextNode(t))}}},959(t,e,a){var r=a(72),o=a.n(r),n=a(206),s=a.n(n),c=a(659),i=a.n(c),p=a(56),l=a.n(p),d=a(540),u=a.n(d),f=a(113),g=a.n(f),v=a(646),h={};h.styleTagTransform=g(),h.setAttributes=l(),h.insert=i().bind(null,"head"),h.domAPI=s(),h.insertStyleElement=u(),o()(v.A,h),v.A&&v.A.locals&&v.A.locals}}]);
import { LabIcon } from '@jupyterlab/ui-components';

/** A graphics card: board, fan, memory chip and edge connector. */
const GPU_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M0 3h1.5v17H0z"/>
    <path fill-rule="evenodd" d="M2.5 5H21a2 2 0 0 1 2 2v9a2 2 0 0 1-2 2H2.5V5zm2 2v9H21V7H4.5z"/>
    <path fill-rule="evenodd" d="M15 7.5a4 4 0 1 1 0 8 4 4 0 0 1 0-8zm0 2.5a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3z"/>
    <path d="M6 9h3.5v5H6z"/>
    <path d="M6 18.5h9V21H6z"/>
  </g>
</svg>`;

export const gpuIcon = new LabIcon({ name: 'jupyter-gpuaas:gpu', svgstr: GPU_SVG });

/**
 * The console's history (docs/console.md, "History (Prometheus)"): the charts of
 * `api/console/history` drawn with uPlot into the page's `<section id="history">`. It keeps its
 * own schedule (a minute) beside the live view, and a history that is unavailable leaves a line
 * that says why, nothing else: the live view never waits for Prometheus.
 *
 * uPlot (MIT, no dependencies, 51 KB minified) is loaded once, beside the first request (once
 * the page's `load` event passed), from the copy the console's build puts beside the page's
 * modules (`npm run build:console`: static/js/vendor/uplot.js and uplot.css); its type
 * declarations come from the npm package. The charts are drawn after the browser painted a
 * frame, and it paints another whenever drawing took `SLICE_MS`, so that drawing them (tens of
 * milliseconds each on a busy machine) never holds back the live view's first paint.
 */

import type uPlot from 'uplot';

import { ApiError, type IHistory, request } from './api.js';
import { drawnLazily } from './controls.js';
import { niceCeiling } from './format.js';
import { h } from '../../../../labextension/src/dom.js';
import type { IConsoleSection } from './consoleSection.js';

const REFRESH_MS = 60_000;
const RANGES = ['15m', '1h', '6h', '1d', '7d'] as const;
type Range = (typeof RANGES)[number];
const RANGE_SECONDS: Record<Range, number> = {
  '15m': 900,
  '1h': 3600,
  '6h': 6 * 3600,
  '1d': 86_400,
  '7d': 7 * 86_400
};
const UPLOT_JS = 'static/js/vendor/uplot.js';
const UPLOT_CSS = 'static/js/vendor/uplot.css';
/** Chart drawing between two chances for the browser to paint (under a long task's 50 ms). */
const SLICE_MS = 30;
/** Colours of a chart's series, in turn (teams sorted by name). */
const COLOURS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2'];

/** One chart as uPlot takes it: the shared times, then a row of values per series. */
export interface IChartModel {
  title: string;
  unit: string;
  names: string[];
  data: (number | null)[][];
  note: string;
  empty: boolean;
}

/** The charts of an answer (pure): `null` when history is unavailable. */
export function chartModels(answer: IHistory): IChartModel[] | null {
  if (!answer.available) {
    return null;
  }
  return answer.charts.map(chart => ({
    title: chart.title,
    unit: chart.unit,
    names: chart.series.map(s => s.name),
    data: [answer.times, ...chart.series.map(s => s.values)],
    note: chart.note ?? '',
    empty: chart.series.every(s => s.values.every(v => v === null))
  }));
}

/**
 * `title (unit)`, or `title` alone where it already names its unit ("Allocated
 * GPU-equivalents", not "Allocated GPU-equivalents (GPU-equivalents)").
 */
export function chartTitle(title: string, unit: string): string {
  return unit && !title.toLowerCase().includes(unit.toLowerCase()) ? `${title} (${unit})` : title;
}

/**
 * A chart's vertical range (pure): from 0 to a round figure above its largest value, 1 when
 * all are 0 (uPlot's own default for a flat series is 0–100, which read as a percentage under
 * a chart of GPU-equivalents).
 */
export function yRange(max: number | null): [number, number] {
  return [0, max !== null && max > 0 ? niceCeiling(max) : 1];
}

/**
 * The shortest range, no longer than `current`, that holds all of `answer`'s data with a
 * little room (pure): a console minutes old opens on its minutes, not on a sliver at the right
 * edge of six hours. `current` where there is no data, or it spans the whole range already.
 */
export function fittingRange(answer: IHistory, current: Range): Range {
  if (!answer.available) {
    return current;
  }
  const times = answer.times;
  const first = times.findIndex((_, k) =>
    answer.charts.some(c => c.series.some(s => s.values[k] !== null))
  );
  if (first < 0 || times.length === 0) {
    return current;
  }
  const span = (times[times.length - 1] ?? 0) - (times[first] ?? 0) + answer.step;
  const fits = RANGES.find(r => RANGE_SECONDS[r] >= span * 1.25);
  return fits !== undefined && RANGE_SECONDS[fits] < RANGE_SECONDS[current] ? fits : current;
}

/**
 * Resolve once the browser had the chance to paint a frame (at most 100 ms later: a page in a
 * hidden tab paints no frames, and its charts are drawn all the same).
 */
function afterPaint(): Promise<void> {
  return new Promise(resolve => {
    const late = window.setTimeout(resolve, 100);
    requestAnimationFrame(() => {
      window.clearTimeout(late);
      window.setTimeout(resolve, 0);
    });
  });
}

type UPlotClass = typeof uPlot;
let loading: Promise<UPlotClass> | null = null;

/** Resolve once the page's own resources are loaded (its `load` event). */
function pageLoaded(): Promise<void> {
  if (document.readyState === 'complete') {
    return Promise.resolve();
  }
  return new Promise(resolve => {
    window.addEventListener(
      'load',
      () => {
        resolve();
      },
      { once: true }
    );
  });
}

/**
 * Load uPlot once, after the page's `load` event, which a script added earlier would put off
 * until the live view is drawn: Chromium lays the whole page out at `load` (forced layouts
 * right after it in its traces), sections far below the screen included.
 */
async function loadUPlot(): Promise<UPlotClass> {
  await pageLoaded();
  loading ??= new Promise<UPlotClass>((resolve, reject) => {
    const script = h('script', { src: UPLOT_JS });
    script.addEventListener('load', () => {
      const loaded = (window as unknown as { uPlot?: UPlotClass }).uPlot;
      if (loaded) {
        resolve(loaded);
      } else {
        reject(new Error(`${UPLOT_JS} defined no uPlot`));
      }
    });
    script.addEventListener('error', () => {
      reject(new Error(`cannot load ${UPLOT_JS}`));
    });
    document.head.append(h('link', { rel: 'stylesheet', href: UPLOT_CSS }), script);
  });
  return loading;
}

function options(model: IChartModel, width: number): uPlot.Options {
  return {
    width,
    height: 180,
    title: chartTitle(model.title, model.unit),
    series: [
      {},
      ...model.names.map((name, i) => ({
        label: name,
        stroke: COLOURS[i % COLOURS.length],
        width: 1.5,
        spanGaps: false
      }))
    ],
    scales: { y: { range: (_u, _min, max) => yRange(max) } },
    axes: [{}, { label: model.unit, size: 60 }],
    legend: { live: true }
  };
}

class HistorySection implements IConsoleSection {
  readonly id = 'history';
  private range: Range = '6h';
  /** The range follows the data there is until the reader picks one. */
  private picked = false;
  private plots: uPlot[] = [];
  private timer = 0;
  /** Counts the draws begun: a draw that a newer one overtook stops. */
  private drawn = 0;

  start(): void {
    const root = document.getElementById(this.id);
    if (root === null) {
      return;
    }
    const picker = h('select', { id: 'history-range', 'aria-label': 'History range' });
    for (const range of RANGES) {
      const option = h('option', { value: range }, `last ${range}`);
      option.selected = range === this.range;
      picker.append(option);
    }
    picker.addEventListener('change', () => {
      this.range = picker.value as Range;
      this.picked = true;
      void this.refresh();
    });
    root.replaceChildren(
      h('h2', {}, 'History ', picker),
      h('p', { id: 'history-status', class: 'hint', role: 'status' }, 'Loading…'),
      h('div', { id: 'history-charts', class: 'charts' })
    );
    // uPlot at once, beside the first request (a failure to load it is draw()'s to say)
    loadUPlot().catch(() => undefined);
    void this.refresh();
  }

  private async refresh(): Promise<void> {
    window.clearTimeout(this.timer);
    const status = document.getElementById('history-status');
    const holder = document.getElementById('history-charts');
    if (status === null || holder === null) {
      return;
    }
    try {
      await this.show(status, holder, await this.load());
    } catch (e) {
      this.clear(holder);
      const why = e instanceof ApiError ? `${String(e.status)}: ${e.message}` : String(e);
      status.textContent = `History is unavailable: ${why}. The live view is not affected.`;
    }
    this.timer = window.setTimeout(() => void this.refresh(), REFRESH_MS);
  }

  /**
   * The history over the range in use; unless the reader picked one, over the range that fits
   * the data (asked for again when it is another).
   */
  private async load(): Promise<IHistory> {
    const answer = await request<IHistory>(`../api/console/history?range=${this.range}`);
    const fitting = this.picked ? this.range : fittingRange(answer, this.range);
    if (fitting === this.range) {
      return answer;
    }
    this.range = fitting;
    this.showRange();
    return request<IHistory>(`../api/console/history?range=${this.range}`);
  }

  /** The charts of an answer, or why there are none. */
  private async show(status: HTMLElement, holder: HTMLElement, answer: IHistory): Promise<void> {
    const models = chartModels(answer);
    if (models === null || !answer.available) {
      this.clear(holder);
      status.textContent = answer.available ? '' : answer.message;
      return;
    }
    const step = answer.step >= 60 ? `${String(answer.step / 60)} min` : `${String(answer.step)} s`;
    status.textContent = `From Prometheus, one point per ${step}.`;
    await this.draw(holder, models);
  }

  /** The picker shows the range in use (chosen from the data, or by the reader). */
  private showRange(): void {
    const picker = document.getElementById('history-range');
    if (picker instanceof HTMLSelectElement) {
      picker.value = this.range;
    }
  }

  private clear(holder: HTMLElement): void {
    this.drawn += 1;
    for (const plot of this.plots) {
      plot.destroy();
    }
    this.plots = [];
    holder.replaceChildren();
  }

  /** Draw `models` into `holder`, `SLICE_MS` of drawing a frame (after the page was laid out). */
  private async draw(holder: HTMLElement, models: IChartModel[]): Promise<void> {
    const UPlot = await loadUPlot();
    this.clear(holder);
    const draw = this.drawn;
    await afterPaint();
    const width = Math.max(320, Math.min(560, holder.clientWidth / 2 - 16));
    let slice = performance.now();
    for (const model of models) {
      if (performance.now() - slice > SLICE_MS) {
        await afterPaint();
        slice = performance.now();
      }
      if (draw !== this.drawn) {
        return; // another answer is being drawn, or history went away
      }
      const box = h('figure', { class: 'chart', 'data-chart': model.title });
      holder.append(box);
      if (model.empty) {
        box.append(h('figcaption', {}, `${model.title}: nothing in this range`));
        continue;
      }
      this.plots.push(new UPlot(options(model, width), model.data as uPlot.AlignedData, box));
      if (model.note) {
        box.append(h('figcaption', { class: 'hint' }, model.note));
      }
    }
    drawnLazily(this.id);
  }
}

/** The history section, started with the page (sections.ts lists it). */
export const historySection: IConsoleSection = new HistorySection();

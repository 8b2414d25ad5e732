import type { Kernel, Session } from '@jupyterlab/services';
import type { Message } from '@lumino/messaging';
import { Poll } from '@lumino/polling';
import { Panel, Widget } from '@lumino/widgets';

import {
  attributionDescription,
  attributionLabel,
  basename,
  capLabel,
  capWarningText,
  coresLabel,
  deviceShortName,
  formatBytes,
  formatPercent,
  formatTime,
  percentOf,
  shortenUuid,
  sourceLabel
} from './format';
import { gpuIcon } from './icon';
import { say } from './messages';
import {
  buildViewModel,
  capLevel,
  otherMemory,
  parseUsage,
  type ICapWarning,
  type IDeviceNode,
  type IKernelRow,
  type IOtherRow,
  type ISessionInfo,
  type IViewModel
} from './model';
import { QueueSection } from './queue';
import { parseQueue } from './queueModel';
import { describeError, serverNotRunning } from './request';
import { type Child, h } from './dom';
import type { IDevice, IUsage } from './types';

/** The refresh interval when the settings give none, in seconds. */
export const DEFAULT_REFRESH_SECONDS = 2;
/** The shortest refresh interval honoured, in seconds. */
export const MIN_REFRESH_SECONDS = 0.5;
/** Polling backs off on errors up to this interval (or ten refresh intervals, if longer). */
const MAX_BACKOFF_MS = 60_000;
/** A bar turns to the warning colour from this percentage on. */
const WARN_PERCENT = 90;

export namespace GpuPanel {
  export interface IOptions {
    /** Fetch one `usage` payload (see docs/api.md). */
    fetchUsage: () => Promise<unknown>;
    /** The app's sessions manager, to name kernels the payload gives no path for. */
    sessions?: Session.IManager;
    /** The app's kernels manager, to refresh as soon as kernels start or stop. */
    kernels?: Kernel.IManager;
    /** Open a notebook or console in the main area. */
    open?: (path: string, sessionType: string | null) => void;
    /** Seconds between refreshes while the panel is visible. */
    refreshInterval?: number;
    /** Fetch one `queue` payload (docs/queue.md); without it there is no Queue section. */
    fetchQueue?: () => Promise<unknown>;
    /** An action shown beside the cap warnings (the way up to a bigger GPU), given them. */
    capAction?: (warnings: readonly ICapWarning[]) => HTMLElement | null;
  }
}

/** A segment of a memory bar. */
/** The key of the focused element within `node`, to focus its successor after a render. */
function focusKeyWithin(node: HTMLElement): string | undefined {
  const active = document.activeElement;
  return active instanceof HTMLElement && node.contains(active)
    ? active.dataset.focusKey
    : undefined;
}

/** A kernel by its notebook, else by its kernel's name and id. */
function kernelName(row: IKernelRow): string {
  const { kernel } = row;
  return (
    row.path ??
    say('panel.kernel', { name: kernel.name ?? '', id: kernel.kernel_id.slice(0, 8) })
      .replace(/\s+/g, ' ')
      .trim()
  );
}

/** A kernel's GPU memory in all: unknown, none shown when it has none, or the bytes. */
function kernelTotal(kernel: IKernelRow['kernel']): string {
  if (kernel.gpu_memory === null) {
    return say('panel.sizeUnknown');
  }
  return kernel.attribution === 'none' && kernel.gpu_memory === 0
    ? ''
    : formatBytes(kernel.gpu_memory);
}

/** A kernel's use of one device: "3 GiB / 24 GiB", or of a fraction's cap. */
function kernelDeviceFigure(use: IKernelRow['devices'][number]): string {
  const { device, bytes } = use;
  if (bytes === null) {
    return say('panel.sizeUnknown');
  }
  return device.cap === null
    ? `${formatBytes(bytes)} / ${formatBytes(device.memory_total)}`
    : say('panel.ofCap', { used: formatBytes(bytes), cap: formatBytes(device.cap.memory) });
}

/** One device a kernel uses: its name, its figure and a bar, marked when near a cap. */
function kernelDeviceItem(use: IKernelRow['devices'][number], name: string): HTMLElement {
  const { device, parent, bytes } = use;
  const deviceName = deviceShortName(device, parent);
  const near = device.cap === null ? null : capLevel(bytes, device.cap.memory);
  return h(
    'li',
    {
      class: `jp-gpuaas-bydevice-item${near === null ? '' : ' jp-mod-near-cap'}`,
      'data-uuid': device.uuid,
      'data-cap': device.cap === null ? undefined : String(device.cap.memory)
    },
    h(
      'div',
      { class: 'jp-gpuaas-line' },
      h(
        'span',
        { class: 'jp-gpuaas-device-ref', title: `${device.name} (${device.uuid})` },
        deviceName
      ),
      h('span', { class: 'jp-gpuaas-figure' }, kernelDeviceFigure(use))
    ),
    bytes !== null
      ? memoryBar(
          say('panel.onDevice', { name, device: deviceName }),
          device.cap?.memory ?? device.memory_total,
          [{ bytes, kind: 'kernels' }]
        )
      : null
  );
}

/** A MIG device's heading: its profile, and its index where it has one. */
function migHeading(device: IDevice): string {
  const profile = device.mig_profile ?? '';
  return device.index === null
    ? say('panel.migDevice', { profile }).trim()
    : say('panel.migDeviceNumbered', { profile, index: device.index });
}

/** The tags after a device's name: MIG-partitioned, a fraction, or shared. */
function deviceTags(device: IDevice, hasMig: boolean): HTMLElement[] {
  const tags: HTMLElement[] = [];
  if (hasMig) {
    tags.push(
      h('span', { class: 'jp-gpuaas-tag', title: say('panel.migTagTitle') }, say('panel.migTag'))
    );
  }
  if (device.cap !== null) {
    tags.push(
      h(
        'span',
        {
          class: 'jp-gpuaas-tag jp-mod-fraction',
          title: say('panel.fractionTitle', { enforcer: device.cap.enforced_by })
        },
        say('panel.fractionTag')
      )
    );
  } else if (device.shared) {
    tags.push(
      h(
        'span',
        {
          class: 'jp-gpuaas-tag jp-mod-shared',
          title: say('panel.sharedTitle')
        },
        say('panel.sharedTag')
      )
    );
  }
  return tags;
}

function memoryFigure(memory: string): HTMLElement {
  return h(
    'span',
    { class: 'jp-gpuaas-figure jp-gpuaas-memory', title: say('panel.memoryTitle') },
    memory
  );
}

interface ISegment {
  bytes: number;
  kind: 'used' | 'kernels' | 'other';
  label?: string;
}

/**
 * A device's memory in use: this server's kernels, then other processes (`other`); one
 * segment where they cannot be split.
 */
function deviceSegments(device: IDevice, other: number | null): ISegment[] {
  return other === null
    ? [{ bytes: device.memory_used, kind: 'used' }]
    : [
        { bytes: Math.max(0, device.memory_used - other), kind: 'kernels' },
        { bytes: Math.min(other, device.memory_used), kind: 'other' }
      ];
}

/**
 * A horizontal memory bar with the ARIA meter role: value in percent of `total`,
 * the figures in words as its value text.
 */
function memoryBar(label: string, total: number, segments: ISegment[]): HTMLElement {
  const used = segments.reduce((sum, s) => sum + Math.max(0, s.bytes), 0);
  const percent = percentOf(used, total);
  const valueText =
    total > 0
      ? say('panel.bar', {
          used: formatBytes(used),
          total: formatBytes(total),
          percent: formatPercent(percent)
        })
      : say('panel.barNoTotal', { used: formatBytes(used) });
  const bar = h('div', {
    class: `jp-gpuaas-bar${percent >= WARN_PERCENT ? ' jp-mod-warn' : ''}`,
    role: 'meter',
    'aria-label': label,
    'aria-valuemin': '0',
    'aria-valuemax': '100',
    'aria-valuenow': String(Math.round(percent)),
    'aria-valuetext': valueText,
    title: say('panel.barTitle', { label, value: valueText })
  });
  for (const segment of segments) {
    const width = percentOf(segment.bytes, total);
    if (width <= 0) {
      continue;
    }
    const fill = h('div', { class: `jp-gpuaas-bar-fill jp-mod-${segment.kind}` });
    // Keep even a tiny allocation visible.
    fill.style.width = `${String(Math.max(width, 1))}%`;
    bar.append(fill);
  }
  return bar;
}

/**
 * The GPU sidebar panel: per-kernel GPU memory, devices, memory of other processes,
 * and where the figures come from. It polls `gpuaas/api/usage` only while visible.
 */
export class GpuPanel extends Panel {
  /** The panel's stable id; its sidebar tab carries it as `data-id`. */
  static readonly ID = 'jupyter-gpuaas-panel';

  /**
   * A container for sections that other features add (a queue section, a reclaim
   * warning banner), between the panel's header and its GPU sections. Empty, it takes
   * no space.
   */
  readonly extras: Panel;

  constructor(options: GpuPanel.IOptions) {
    super();
    this.id = GpuPanel.ID;
    this.addClass('jp-gpuaas-panel');
    this.title.icon = gpuIcon;
    this.title.caption = say('panel.caption');
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', say('panel.label'));

    this._fetchUsage = options.fetchUsage;
    this._sessions = options.sessions ?? null;
    this._kernels = options.kernels ?? null;
    this._open = options.open ?? null;
    this._capAction = options.capAction ?? null;

    this._header = new Widget({ node: this._createHeader() });
    this._header.addClass('jp-gpuaas-header');
    this.extras = new Panel();
    this.extras.addClass('jp-gpuaas-extras');
    this._body = new Widget();
    this._body.addClass('jp-gpuaas-body');
    this.addWidget(this._header);
    this.addWidget(this.extras);
    this.addWidget(this._body);
    this._fetchQueue = options.fetchQueue ?? null;
    this._queue = this._fetchQueue === null ? null : new QueueSection();
    if (this._queue !== null) {
      this.extras.addWidget(this._queue);
    }

    this._poll = this._createPoll(options.refreshInterval);

    this._sessions?.runningChanged.connect(this._onRunningChanged);
    this._kernels?.runningChanged.connect(this._onRunningChanged);
    this._renderBody();
  }

  /** The usage poll, started when the panel is shown; backs off on errors up to 10 intervals. */
  private _createPoll(seconds: number | undefined): Poll {
    const interval = GpuPanel.intervalMs(seconds ?? DEFAULT_REFRESH_SECONDS);
    return new Poll({
      auto: false,
      factory: () => this._tick(),
      frequency: { interval, backoff: true, max: Math.max(MAX_BACKOFF_MS, interval * 10) },
      name: 'jupyter-gpuaas:usage',
      standby: 'when-hidden'
    });
  }

  /** Milliseconds between refreshes for a setting in seconds (bad values give the default). */
  static intervalMs(seconds: number): number {
    const s = Number.isFinite(seconds) && seconds > 0 ? seconds : DEFAULT_REFRESH_SECONDS;
    return Math.round(Math.max(MIN_REFRESH_SECONDS, s) * 1000);
  }

  /** Seconds between refreshes while the panel is visible. */
  get refreshInterval(): number {
    return this._poll.frequency.interval / 1000;
  }

  set refreshInterval(seconds: number) {
    const interval = GpuPanel.intervalMs(seconds);
    if (interval === this._poll.frequency.interval) {
      return;
    }
    this._poll.frequency = {
      backoff: true,
      interval,
      max: Math.max(MAX_BACKOFF_MS, interval * 10)
    };
    // Apply it now rather than after the interval already scheduled.
    if (this._polling) {
      void this._poll.refresh();
    }
  }

  /** Whether the panel is polling (it is visible). */
  get isPolling(): boolean {
    return this._polling;
  }

  /** Fetch now, if the panel is visible. */
  refresh(): Promise<void> {
    return this._polling ? this._poll.refresh() : Promise.resolve();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._sessions?.runningChanged.disconnect(this._onRunningChanged);
    this._kernels?.runningChanged.disconnect(this._onRunningChanged);
    this._poll.dispose();
    super.dispose();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (this.isVisible) {
      this._startPolling();
    }
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._startPolling();
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this._stopPolling();
  }

  protected onBeforeDetach(msg: Message): void {
    this._stopPolling();
    super.onBeforeDetach(msg);
  }

  private _startPolling(): void {
    if (this._polling) {
      return;
    }
    this._polling = true;
    void this._poll.start();
  }

  private _stopPolling(): void {
    if (!this._polling) {
      return;
    }
    this._polling = false;
    void this._poll.stop();
  }

  /** A notebook opened or a kernel stopped: show it now rather than at the next tick. */
  private readonly _onRunningChanged = (): void => {
    this._renderBody();
    void this.refresh();
  };

  /** One poll tick: fetch, check, render. A rejection makes the poll back off. */
  private async _tick(): Promise<void> {
    // The queue comes from the hub service: its failure shows in its section only.
    const queued = this._tickQueue();
    try {
      await this._tickUsage();
    } finally {
      await queued;
    }
  }

  private async _tickQueue(): Promise<void> {
    if (this._fetchQueue === null || this._queue === null) {
      return;
    }
    try {
      this._queue.setQueue(parseQueue(await this._fetchQueue()), null);
    } catch (error) {
      if (serverNotRunning(error)) {
        return; // said once, by the usage note; the queue keeps what it last showed
      }
      this._queue.setQueue(null, say('panel.queueFailed', { problem: describeError(error) }));
    }
  }

  private async _tickUsage(): Promise<void> {
    let usage: IUsage;
    try {
      usage = parseUsage(await this._fetchUsage());
    } catch (error) {
      this._setError(describeError(error), serverNotRunning(error));
      this._renderBody();
      throw error;
    }
    this._usage = usage;
    this._setError(null);
    this._renderHeader();
    this._renderBody();
  }

  private _sessionInfo(): Map<string, ISessionInfo> {
    const result = new Map<string, ISessionInfo>();
    if (this._sessions === null) {
      return result;
    }
    for (const session of this._sessions.running()) {
      if (session.kernel) {
        result.set(session.kernel.id, {
          path: session.path,
          type: session.type,
          name: session.name
        });
      }
    }
    return result;
  }

  private _createHeader(): HTMLElement {
    this._source = h(
      'span',
      { class: 'jp-gpuaas-source', 'data-source': 'loading' },
      say('panel.sourceLoading')
    );
    this._updated = h('span', { class: 'jp-gpuaas-updated' });
    this._note = h('div', {
      class: 'jp-gpuaas-note jp-gpuaas-error-note',
      role: 'status',
      'aria-live': 'polite'
    });
    this._note.hidden = true;
    this._partial = h('div', { class: 'jp-gpuaas-note jp-gpuaas-partial' });
    this._partial.hidden = true;
    return h(
      'div',
      {},
      h(
        'div',
        { class: 'jp-gpuaas-titlebar' },
        h('h2', { class: 'jp-gpuaas-title' }, say('panel.title')),
        this._source
      ),
      this._updated,
      this._partial,
      this._note
    );
  }

  private _renderHeader(): void {
    const usage = this._usage;
    if (usage === null) {
      return;
    }
    const label = sourceLabel(usage);
    this._source.textContent = label;
    this._source.dataset.source = usage.source;
    this._source.title =
      usage.source === 'simulated'
        ? say('panel.sourceSimulated')
        : usage.source === 'nvml'
          ? say('panel.sourceNvml')
          : label;
    this._updated.textContent = say('panel.updated', { time: formatTime(usage.sampled_at) });
    // With a working source, `error` says which part of the read failed (a GPU lost, a
    // process list refused): the figures shown are what could be read.
    const partial = usage.source !== 'unavailable' && usage.error !== null ? usage.error : null;
    this._partial.hidden = partial === null;
    this._partial.textContent = partial === null ? '' : say('panel.partial', { problem: partial });
  }

  private _setError(error: string | null, notRunning = false): void {
    if (error === this._error) {
      return;
    }
    this._error = error;
    if (error === null) {
      this._note.hidden = true;
      this._note.textContent = '';
      this.removeClass('jp-mod-error');
      return;
    }
    this.addClass('jp-mod-error');
    this._note.hidden = false;
    if (notRunning) {
      this._note.textContent =
        this._usage === null
          ? say('panel.notRunningYet')
          : say('panel.notRunning', { time: formatTime(this._usage.sampled_at) });
      return;
    }
    this._note.textContent =
      this._usage === null
        ? say('panel.loadFailed', { problem: error })
        : say('panel.refreshFailed', {
            problem: error,
            time: formatTime(this._usage.sampled_at)
          });
  }

  private _renderBody(): void {
    const node = this._body.node;
    const usage = this._usage;
    const model = usage === null ? null : buildViewModel(usage, this._sessionInfo());
    const signature = model === null ? '' : this._signature(model);
    if (model !== null && signature === this._signatureRendered) {
      return;
    }
    this._signatureRendered = signature;

    // Re-rendering replaces the elements: keep keyboard focus where it was.
    const focusKey = focusKeyWithin(node);
    node.replaceChildren(...this._bodyContent(model));
    if (focusKey !== undefined) {
      const target = node.querySelector<HTMLElement>(`[data-focus-key="${CSS.escape(focusKey)}"]`);
      target?.focus();
    }
  }

  /** The body: loading, no GPU, or the cap warnings, kernels, devices and other processes. */
  private _bodyContent(model: IViewModel | null): HTMLElement[] {
    if (model === null) {
      return [
        h('p', { class: 'jp-gpuaas-placeholder' }, this._error === null ? say('panel.loading') : '')
      ];
    }
    if (model.usage.devices.length === 0) {
      return [this._renderEmpty(model.usage)];
    }
    // Without cap warnings, the cap action's node still shows any way down (resize.ts).
    const atEase = model.capWarnings.length > 0 ? null : (this._capAction?.([]) ?? null);
    return [
      ...(model.capWarnings.length > 0 ? [this._renderCapWarnings(model.capWarnings)] : []),
      ...(atEase === null ? [] : [atEase]),
      this._renderKernels(model),
      this._renderDevices(model),
      this._renderOther(model)
    ];
  }

  /** What the body shows, without the sampling time: unchanged figures are not re-rendered. */
  private _signature(model: IViewModel): string {
    return JSON.stringify({
      ...model.usage,
      sampled_at: null,
      kernels: model.kernels.map(k => [k.kernel, k.path, k.sessionType])
    });
  }

  /** One alert line per kernel (or device) near a fraction's memory cap. */
  private _renderCapWarnings(warnings: ICapWarning[]): HTMLElement {
    return h(
      'div',
      { class: 'jp-gpuaas-cap-warnings', role: 'alert' },
      ...warnings.map(w => {
        const who =
          w.kernel === null
            ? null
            : w.kernel.path === null
              ? (w.kernel.kernel.name ?? w.kernel.kernel.kernel_id)
              : basename(w.kernel.path);
        const deviceName = deviceShortName(w.device, w.parent);
        return h(
          'p',
          {
            class: `jp-gpuaas-cap-warning jp-mod-${w.level}`,
            'data-uuid': w.device.uuid,
            'data-kernel-id': w.kernel?.kernel.kernel_id
          },
          capWarningText(who, deviceName, w.bytes, w.cap, w.level)
        );
      }),
      this._capAction?.(warnings)
    );
  }

  private _renderEmpty(usage: IUsage): HTMLElement {
    const hint = usage.source === 'unavailable' ? say('panel.noNvml') : say('panel.noDevices');
    return h(
      'div',
      { class: 'jp-gpuaas-empty' },
      h('p', { class: 'jp-gpuaas-empty-title' }, say('panel.noGpu')),
      h('p', { class: 'jp-gpuaas-hint' }, hint)
    );
  }

  private _section(key: string, title: string, ...content: Child[]): HTMLElement {
    const headingId = `jp-gpuaas-${key}-heading`;
    return h(
      'section',
      { class: `jp-gpuaas-section jp-gpuaas-section-${key}`, 'aria-labelledby': headingId },
      h('h3', { id: headingId, class: 'jp-gpuaas-section-title' }, title),
      ...content
    );
  }

  private _renderKernels(model: IViewModel): HTMLElement {
    if (model.kernels.length === 0) {
      return this._section(
        'kernels',
        say('panel.notebooks'),
        h('p', { class: 'jp-gpuaas-hint' }, say('panel.noKernels'))
      );
    }
    return this._section(
      'kernels',
      say('panel.notebooks'),
      h('ul', { class: 'jp-gpuaas-kernels' }, ...model.kernels.map(row => this._renderKernel(row)))
    );
  }

  private _renderKernel(row: IKernelRow): HTMLElement {
    const { kernel } = row;
    const name = kernelName(row);
    const meta = [row.sessionType, kernel.name, kernel.execution_state].filter(
      (part): part is string => part !== null && part.length > 0
    );
    const devices =
      row.devices.length === 0
        ? null
        : h(
            'ul',
            { class: 'jp-gpuaas-bydevice', 'aria-label': say('panel.byDevice', { name }) },
            ...row.devices.map(use => kernelDeviceItem(use, name))
          );

    return h(
      'li',
      {
        class: 'jp-gpuaas-kernel',
        'data-kernel-id': kernel.kernel_id,
        'data-path': row.path ?? undefined,
        'data-attribution': kernel.attribution
      },
      h(
        'div',
        { class: 'jp-gpuaas-line' },
        this._kernelTitle(row, name),
        h('span', { class: 'jp-gpuaas-kernel-total jp-gpuaas-figure' }, kernelTotal(kernel))
      ),
      h(
        'div',
        { class: 'jp-gpuaas-meta' },
        meta.length > 0 ? `${meta.join(' · ')} · ` : '',
        h(
          'span',
          { class: 'jp-gpuaas-attribution', title: attributionDescription(kernel.attribution) },
          attributionLabel(kernel.attribution)
        )
      ),
      devices
    );
  }

  /** The kernel's notebook as a button that opens it, or its name where it cannot be opened. */
  private _kernelTitle(row: IKernelRow, name: string): HTMLElement {
    if (row.path === null || this._open === null) {
      return h('span', { class: 'jp-gpuaas-kernel-name', title: name }, name);
    }
    const open = this._open;
    const path = row.path;
    const title = h(
      'button',
      {
        type: 'button',
        class: 'jp-gpuaas-kernel-name jp-gpuaas-link',
        title: say('panel.open', { path }),
        'data-focus-key': `open:${row.kernel.kernel_id}`
      },
      path
    );
    title.addEventListener('click', () => {
      open(path, row.sessionType);
    });
    return title;
  }

  private _renderDevices(model: IViewModel): HTMLElement {
    return this._section(
      'devices',
      say('panel.devices'),
      h(
        'ul',
        { class: 'jp-gpuaas-devices' },
        ...model.tree.map(node => this._renderDevice(node, model.usage))
      )
    );
  }

  private _renderDevice(node: IDeviceNode, usage: IUsage): HTMLElement {
    const { device, parent, children } = node;
    const shortName = deviceShortName(device, parent);
    const isMig = device.parent_uuid !== null;
    const heading = isMig ? migHeading(device) : shortName;
    const tags = deviceTags(device, children.length > 0);
    const memory = `${formatBytes(device.memory_used)} / ${formatBytes(device.memory_total)}`;
    return h(
      'li',
      { class: `jp-gpuaas-device${isMig ? ' jp-mod-mig' : ''}`, 'data-uuid': device.uuid },
      h(
        'div',
        { class: 'jp-gpuaas-line' },
        h('span', { class: 'jp-gpuaas-device-name' }, heading, ...tags),
        device.utilization === null
          ? memoryFigure(memory)
          : h(
              'span',
              { class: 'jp-gpuaas-util', title: say('panel.utilTitle') },
              say('panel.util', { util: Math.round(device.utilization) })
            )
      ),
      isMig ? null : h('div', { class: 'jp-gpuaas-model' }, device.name),
      h(
        'div',
        { class: 'jp-gpuaas-line' },
        h('span', { class: 'jp-gpuaas-uuid', title: device.uuid }, shortenUuid(device.uuid)),
        device.utilization === null ? null : memoryFigure(memory)
      ),
      device.cap === null ? null : this._renderCap(device.cap),
      memoryBar(
        say('panel.memoryUsedOn', { device: shortName }),
        device.cap?.memory ?? device.memory_total,
        deviceSegments(device, otherMemory(usage, device.uuid))
      ),
      children.length === 0 ? null : this._renderMigGroup(device, shortName, children, usage)
    );
  }

  /** Where a fraction's cap comes from, and its compute share. */
  private _renderCap(cap: NonNullable<IDevice['cap']>): HTMLElement {
    const cores = coresLabel(cap);
    return h(
      'div',
      {
        class: 'jp-gpuaas-cap',
        title: say('panel.capTitle')
      },
      capLabel(cap),
      cores === null ? '' : ` · ${cores}`
    );
  }

  /**
   * The MIG devices of a GPU, in a disclosure: open while any of them holds memory, unless
   * the user opened or closed it (remembered across refreshes).
   */
  private _renderMigGroup(
    device: IDevice,
    shortName: string,
    children: IDeviceNode[],
    usage: IUsage
  ): HTMLElement {
    const used = children.reduce((sum, c) => sum + c.device.memory_used, 0);
    const total = children.reduce((sum, c) => sum + c.device.memory_total, 0);
    const summary = h(
      'summary',
      { class: 'jp-gpuaas-mig-summary' },
      children.length === 1 ? say('panel.migOne') : say('panel.migMany', { n: children.length }),
      h('span', { class: 'jp-gpuaas-figure' }, `${formatBytes(used)} / ${formatBytes(total)}`)
    );
    const details = h(
      'details',
      { class: 'jp-gpuaas-mig-group' },
      summary,
      h(
        'ul',
        {
          class: 'jp-gpuaas-devices jp-gpuaas-mig',
          'aria-label': say('panel.migDevicesOf', { device: shortName })
        },
        ...children.map(child => this._renderDevice(child, usage))
      )
    );
    details.open = this._migOpen.get(device.uuid) ?? used > 0;
    // A click (or Enter, Space) on the summary is the user's choice; `toggle` also fires
    // when the panel itself sets `open`.
    summary.addEventListener('click', () => {
      this._migOpen.set(device.uuid, !details.open);
    });
    return details;
  }

  private _renderOther(model: IViewModel): HTMLElement {
    const title = say('panel.other');
    if (model.other.length === 0) {
      return this._section(
        'other',
        title,
        h('p', { class: 'jp-gpuaas-hint' }, say('panel.otherNone'))
      );
    }
    return this._section(
      'other',
      title,
      h('ul', { class: 'jp-gpuaas-other' }, ...model.other.map(row => this._renderOtherRow(row)))
    );
  }

  private _renderOtherRow(row: IOtherRow): HTMLElement {
    const { device, parent, bytes } = row;
    const who =
      device.cap !== null
        ? say('panel.otherCapped')
        : device.shared
          ? say('panel.otherShared')
          : say('panel.otherDriver');
    return h(
      'li',
      {
        class: 'jp-gpuaas-other-item',
        'data-uuid': device.uuid,
        'data-shared': String(device.shared)
      },
      h(
        'div',
        { class: 'jp-gpuaas-line' },
        h(
          'span',
          { class: 'jp-gpuaas-device-ref', title: `${device.name} (${device.uuid})` },
          deviceShortName(device, parent)
        ),
        bytes === null
          ? h(
              'span',
              {
                class: 'jp-gpuaas-figure',
                title: say('panel.otherUnknownTitle')
              },
              say('panel.otherUnknown')
            )
          : h('span', { class: 'jp-gpuaas-figure' }, formatBytes(bytes))
      ),
      h('div', { class: 'jp-gpuaas-meta' }, who)
    );
  }

  private readonly _fetchUsage: () => Promise<unknown>;
  private readonly _fetchQueue: (() => Promise<unknown>) | null;
  private readonly _queue: QueueSection | null;
  private readonly _sessions: Session.IManager | null;
  private readonly _kernels: Kernel.IManager | null;
  private readonly _open: ((path: string, sessionType: string | null) => void) | null;
  private readonly _capAction: ((warnings: readonly ICapWarning[]) => HTMLElement | null) | null;
  private readonly _poll: Poll;
  private readonly _header: Widget;
  private readonly _body: Widget;
  private _source!: HTMLElement;
  private _updated!: HTMLElement;
  private _note!: HTMLElement;
  private _partial!: HTMLElement;
  private _polling = false;
  private _usage: IUsage | null = null;
  private _error: string | null = null;
  private _signatureRendered: string | null = null;
  /** MIG groups the user opened (true) or closed (false), by parent GPU UUID. */
  private readonly _migOpen = new Map<string, boolean>();
}

/**
 * Durations in prose, one form for the project's pages: the JupyterLab sidebar (this folder) and
 * the GPU console (culler/gpuaas_service/console/src), which compiles this same file into its own
 * build. No imports, so that both builds can take it as it is.
 */

/**
 * A duration in words, to the nearest second: `45 s`, `12 min`, `1 h`, `3 h 5 min`, `30 h`,
 * `2 d 4 h`, `7 d`. Hours up to two days (a day and a half reads better as `36 h`), days from
 * then on. Negative durations read as `0 s`; a figure that is not a finite number is the
 * caller's to word (`unknown`, or nothing).
 */
export function durationWords(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return `${String(s)} s`;
  }
  const m = Math.floor(s / 60);
  if (m < 60) {
    return `${String(m)} min`;
  }
  const h = Math.floor(m / 60);
  if (h < 48) {
    return m % 60 ? `${String(h)} h ${String(m % 60)} min` : `${String(h)} h`;
  }
  const d = Math.floor(h / 24);
  return h % 24 ? `${String(d)} d ${String(h % 24)} h` : `${String(d)} d`;
}

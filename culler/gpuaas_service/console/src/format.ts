/** Figures as the console shows them. */

/** "45 s", "12 min", "3 h 5 min", "2 d 4 h"; "" for no figure. */
export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) {
    return '';
  }
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
    return `${String(h)} h ${String(m % 60)} min`;
  }
  return `${String(Math.floor(h / 24))} d ${String(h % 24)} h`;
}

/** A time in the reader's locale; "" for none. */
export function when(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : '';
}

/** Seconds from `iso` to `now` (both ISO times); `null` without a time. */
export function secondsSince(iso: string | null, now: string): number | null {
  return iso ? (Date.parse(now) - Date.parse(iso)) / 1000 : null;
}

/** "6.1 GiB", "512 MiB" (as the service's format_gib); "" for no figure. */
export function gib(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) {
    return '';
  }
  if (bytes >= 2 ** 30) {
    return `${(bytes / 2 ** 30).toFixed(1).replace(/\.0$/, '')} GiB`;
  }
  return `${String(Math.round(bytes / 2 ** 20))} MiB`;
}

/** A nice round upper end for a bar's scale: 1, 2, 5, 10, 20, 50… at or above `value`. */
export function niceCeiling(value: number): number {
  if (value <= 0) {
    return 1;
  }
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) {
    if (step * power >= value) {
      return step * power;
    }
  }
  return 10 * power;
}

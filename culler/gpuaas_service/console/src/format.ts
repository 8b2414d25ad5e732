/** Figures as the console shows them. */
import { durationWords } from '../../../../labextension/src/durations.js';

/** "45 s", "12 min", "3 h 5 min", "2 d 4 h" (as the sidebar says them); "" for no figure. */
export function duration(seconds: number | null | undefined): string {
  return seconds === null || seconds === undefined ? '' : durationWords(seconds);
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

/** "1 workbench", "3 workbenches", "0 workloads": a count with its noun in the right number. */
export function count(n: number, one: string, many = `${one}s`): string {
  return `${String(n)} ${n === 1 ? one : many}`;
}

/**
 * Sections of the console that keep their own schedule beside the live view (their own API
 * and polling), started once when the page loads. The live view (overview, teams, every GPU,
 * sizing, workbenches, reclaims, policy) is main.ts's.
 *
 * To add one, write its module here (e.g. `history.ts`, which fills the page's empty
 * `<section id="history">`), export an `IConsoleSection` (`consoleSection.ts`) from it and
 * list it in `SECTIONS`.
 */

import { checksSection } from './checks.js';
import type { IConsoleSection } from './consoleSection.js';
import { historySection } from './history.js';

/** The sections started with the page. */
export const SECTIONS: readonly IConsoleSection[] = [historySection, checksSection];

/** Start every section of `SECTIONS`. */
export function startSections(sections: readonly IConsoleSection[] = SECTIONS): void {
  for (const section of sections) {
    section.start();
  }
}

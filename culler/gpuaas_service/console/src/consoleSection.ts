/**
 * What a section of the console with a life of its own is: its own module, so that the
 * sections (`checks.ts`, `history.ts`) and the list that starts them (`sections.ts`) import it
 * without importing each other.
 */

/** A section with a life of its own. */
export interface IConsoleSection {
  /** The id of the page's `<section>` it fills. */
  readonly id: string;
  /** Called once, after the page loaded. */
  start(): void;
}

/**
 * Every sentence that the reclaim parts of the sidebar, the notifications, the page title and
 * the browser's own notification show a data scientist, in one table. `{name}` is filled in
 * by `say()`. labextension/test/messages.test.ts renders each one and checks the words (no
 * Kubernetes reasons, ISO timestamps, HTTP codes or setting names): changing one is a change
 * to this table and to that test.
 */
export const MESSAGES = {
  // What the server holds, as its user calls it.
  'holding.gpu': 'this GPU',
  'holding.mig': 'this MIG slice',
  'holding.shared': 'this shared GPU',
  'holding.fraction': 'this GPU share',
  'holding.cpu': 'this server',

  // Relative times (they count, once a second in the sidebar).
  'relative.in': 'in {duration}',
  'relative.due': 'any moment now',
  'relative.ago': '{duration} ago',
  'relative.justNow': 'just now',

  // The warning.
  'warn.title': '{Holding} will be freed at {time} ({countdown})',
  'warn.titleDryRun': '{Holding} would be freed at {time} ({countdown}): a trial, nothing stops',
  'warn.reasonFallback': 'Queued work needs what it holds.',
  'warn.loss':
    'The server will be stopped: open documents are saved first, but running kernels and ' +
    'their state (variables, GPU memory) are lost. Your files stay.',
  'warn.details': 'Details',
  'warn.keepButton': 'Keep my GPU ({left} left)',
  'warn.toast':
    '{Holding} will be freed at {time} ({countdown}) {purpose}. Your files stay; running kernels stop.',
  'warn.browserTitle': 'Your GPU will be freed at {time}',
  'warn.pageTitle': 'GPU freed {countdown} · ',
  'warn.tabCaption': 'GPU: {holding} will be freed at {time}',
  'warn.over': 'The reclaim warning is over: {holding} stays with this server.',
  'warn.askBrowser': 'Also tell me when this tab is in the background',

  // Why, in full (the sidebar) and short (the notification, at most 140 characters in all).
  'cause.ownWork': "Your team's {noun} {name} is waiting for {holding}",
  'cause.otherTeam': 'Queued work of team {team} is waiting for {holding}',
  'cause.anotherTeam': 'Queued work of another team is waiting for {holding}',
  'cause.queued': 'Queued work is waiting for {holding}.',
  'cause.idleTail': ', idle for {idle}.',
  'cause.maxIdle': 'It has been idle for {idle}; the limit is {limit}.',
  'cause.maxIdleNoLimit': 'It has been idle for {idle}.',
  'cause.always': 'It has been idle for {idle}, and idle GPUs go back to the pool.',
  'cause.maxAge':
    'This server has run for the longest a server may run ({limit}), even while in use.',
  'cause.maxAgeNoLimit': 'This server has run for the longest a server may run, even while in use.',
  'noun.job': 'job',
  'noun.notebook': 'notebook',
  'noun.work': 'work',
  'purpose.demand': 'for queued work',
  'purpose.idle': 'as it has been idle past the limit',
  'purpose.always': 'as idle GPUs go back to the pool',
  'purpose.maxAge': 'as the server has run its longest',
  'purpose.unknown': 'for queued work or idleness',

  // Actions.
  'action.keep': 'Keep my GPU',
  'action.keepCaption': 'Ask to keep the GPU a while longer',
  'action.save': 'Save now',
  'action.saveCaption': 'Save every open document',
  'action.startAgain': 'Start again',
  'action.startAgainCaption': "Open the hub's home page to start your server again",

  // Answers to "Keep my GPU" and to the save before the stop.
  'keep.untilMore': 'Kept: {holding} stays until {time} ({countdown}). You can keep it {more}.',
  'keep.untilLast': 'Kept: {holding} stays until {time} ({countdown}). That was the last keep.',
  'keep.done': 'Kept.',
  'keep.onceMore': 'once more',
  'keep.moreTimes': '{n} more times',
  'keep.refused':
    'This GPU could not be kept: no “Keep my GPU” is left, or the stop has already begun. ' +
    'Save your work now.',
  'keep.failed': 'Keeping the GPU did not go through: the server did not answer. Save your work.',
  'save.done': 'Your open documents were saved.',
  'save.failed': 'Saving the open documents failed: save your work now.',

  // The old tab, once the server was stopped after the warning it showed.
  'stopped.title': 'Your server was stopped',
  'stopped.when': 'It was stopped at about {time} ({ago}) to free {holding} {purpose}.',
  'stopped.kept': 'Your files are kept; running kernels and their variables were lost.',
  'stopped.hub': "To go on, start your server again from the hub's home page.",
  'stopped.hubLink': "hub's home page",
  'stopped.noHub': 'To go on, start your server again.',
  'stopped.toast':
    'Your server was stopped at about {time} to free {holding} {purpose}. Your files are kept.',
  'stopped.browserTitle': 'Your server was stopped',
  'stopped.pageTitle': 'Server stopped · ',
  'stopped.tabCaption': 'GPU: your server was stopped',

  // The sidebar's other notes, where a request fails.
  'error.notRunning': 'your server is not running',
  'error.unreachable': 'the server cannot be reached',
  'error.refused': 'this page is not allowed to ask',
  'error.serverError': 'the server had a problem',
  'error.other': 'the server gave no usable answer',

  // The Queue section, when the hub's gpuaas service gives no queue (the details: the log).
  'queue.forbidden':
    'The queue cannot be shown: this server may not ask for it. An administrator can see why ' +
    "in the browser's console and the server's log.",
  'queue.unavailable': 'The queue cannot be reached right now. Retrying.',
  'queue.serviceError':
    'The queue service had a problem. Retrying; an administrator can see why in its log.'
} as const;

export type MessageKey = keyof typeof MESSAGES;

/**
 * A message with its `{name}` slots filled. `{Name}` (capitalised) takes the value with its
 * first letter in upper case. A slot without a value stays visible, so a test catches it.
 */
export function say(key: MessageKey, values: Record<string, string | number> = {}): string {
  return MESSAGES[key].replace(/\{([A-Za-z]+)\}/g, (slot, name: string) => {
    const lower = name.charAt(0).toLowerCase() + name.slice(1);
    const value = name in values ? values[name] : lower in values ? values[lower] : undefined;
    if (value === undefined) {
      return slot;
    }
    const text = String(value);
    return name === lower ? text : text.charAt(0).toUpperCase() + text.slice(1);
  });
}

/**
 * Every sentence that JupyterLab shows a data scientist for this extension — the GPU panel's
 * figures and notes, its Queue section, the commands, the reclaim parts of the sidebar, the
 * notifications, the page title and the browser's own notification, the GPU jobs dialog and
 * section, the way up to a bigger GPU, and a notebook's saved variables — in one table.
 * `{name}` is filled in by `say()`. labextension/test/messages.test.ts renders each one and
 * checks the words (no Kubernetes reasons, ISO timestamps, HTTP codes or setting names):
 * changing one is a change to this table and to that test.
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
    'The server will be stopped: open documents are saved first, and each idle kernel saves ' +
    'its variables: they come back when you open its notebook again (a notice there names any ' +
    'that could not be saved). A kernel still running a cell stops without saving. GPU memory ' +
    'is freed. Your files stay.',
  'warn.lossNoState':
    'The server will be stopped: open documents are saved first. Running kernels stop, and ' +
    'their variables are lost: this server does not keep kernel state. GPU memory is freed. ' +
    'Your files stay.',
  'warn.details': 'Details',
  'warn.keepButton': 'Keep my GPU ({left} left)',
  'warn.toast':
    '{Holding} will be freed at {time} ({countdown}) {purpose}. Files stay; saved variables come back.',
  'warn.toastNoState':
    '{Holding} will be freed at {time} ({countdown}) {purpose}. Files stay; variables are lost.',
  'warn.browserTitle': 'Your GPU will be freed at {time}',
  'warn.pageTitle': 'GPU freed {countdown} · ',
  'warn.tabCaption': 'GPU: {holding} will be freed at {time}',
  'warn.over': 'The reclaim warning is over: {holding} stays with this server.',
  'warn.askBrowser': 'Also tell me when this tab is in the background',

  // Why, in full (the sidebar) and short (the notification, at most 140 characters in all).
  'cause.ownWork': "Your team's {noun} {name} is waiting for {holding}",
  'cause.otherTeam': 'Queued work of {team} is waiting for {holding}',
  'cause.anotherTeam': 'Queued work of another team is waiting for {holding}',
  'cause.queued': 'Queued work is waiting for {holding}.',
  'cause.placementOwn':
    "Your team's {noun} {name} needs a whole GPU, and this idle share is on the card it can use.",
  'cause.placement': 'A training Job needs a whole GPU; your idle share is on the card it can use.',
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
  'purpose.placement': 'to free a whole GPU for a training Job',
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
  'stopped.kept':
    'Your files are kept. Running kernels stopped: the variables they could save come back ' +
    'when you open each notebook again, and a notice there says which did not.',
  'stopped.keptNoState':
    'Your files are kept. Running kernels stopped, and their variables were not kept: run ' +
    'the notebooks again.',
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

  // The GPU panel: its header and notes.
  'panel.label': 'GPU usage',
  'panel.caption': 'GPU',
  'panel.title': 'GPU',
  'panel.sourceLoading': 'loading',
  'panel.sourceSimulated':
    'Simulated GPUs: the figures come from a fake NVML library, not from real hardware.',
  'panel.sourceNvml': 'Figures from the NVIDIA driver (NVML).',
  'panel.updated': 'Updated {time}',
  'panel.partial': 'Some figures could not be read: {problem}',
  'panel.loading': 'Loading GPU usage…',
  'panel.loadFailed': 'Could not load GPU usage: {problem}. Retrying.',
  'panel.refreshFailed': 'Could not refresh: {problem}. Showing the figures of {time}; retrying.',
  'panel.queueFailed': 'Could not load the queue: {problem}. Retrying.',
  'panel.notRunning': 'Your server is not running; the figures below are from {time}.',
  'panel.notRunningYet': 'Your server is not running.',
  'panel.noGpu': 'No GPU visible to this server',
  'panel.noNvml': 'NVML is unavailable on this server; the reason is shown above.',
  'panel.noDevices':
    'The driver reports no devices: this server may have been started without a GPU.',

  // The GPU panel: notebooks, devices and other memory.
  'panel.notebooks': 'Notebooks',
  'panel.noKernels': 'No running kernels.',
  'panel.kernel': 'Kernel {name} {id}',
  'panel.open': 'Open {path}',
  'panel.sizeUnknown': 'size unknown',
  'panel.byDevice': 'GPU memory of {name} by device',
  'panel.onDevice': 'GPU memory of {name} on {device}',
  'panel.ofCap': '{used} of {cap} cap',
  'panel.bar': '{used} of {total} ({percent})',
  'panel.barNoTotal': '{used}, capacity unknown',
  'panel.barTitle': '{label}: {value}',
  'panel.devices': 'Devices',
  'panel.migTag': 'MIG',
  'panel.migTagTitle': 'This GPU is split into MIG devices.',
  'panel.fractionTag': 'fraction',
  'panel.fractionTitle':
    'A fraction of the GPU: its memory is capped by {enforcer} and used memory is this ' +
    "server's alone; compute is shared with other people's work, and there is no fault " +
    'isolation.',
  'panel.sharedTag': 'shared',
  'panel.sharedTitle':
    'Time-shared with other work: used memory includes other processes, possibly other users.',
  'panel.migDevice': 'MIG {profile}',
  'panel.migDeviceNumbered': 'MIG {profile} #{index}',
  'panel.memoryTitle': 'memory used / total',
  'panel.utilTitle': 'GPU utilisation',
  'panel.util': '{util}% util',
  'panel.memoryUsedOn': 'Memory used on {device}',
  'panel.capTitle':
    'The memory this server may use on the GPU, as HAMi-core reports it through NVML; the ' +
    "GPU itself may be larger and hold other people's work.",
  'panel.migOne': '1 MIG device',
  'panel.migMany': '{n} MIG devices',
  'panel.migDevicesOf': 'MIG devices of {device}',
  'panel.other': 'Other memory',
  'panel.otherNone': "All used GPU memory belongs to this server's kernels.",
  'panel.otherCapped': "this server's processes outside its kernels (the cap counts only its own)",
  'panel.otherShared': 'other processes, possibly other users',
  'panel.otherDriver': "driver and processes outside this server's kernels",
  'panel.otherUnknown': 'unknown',
  'panel.otherUnknownTitle':
    "Cannot be split from the kernels' memory: a kernel's size on this device is unknown, " +
    'or its process list could not be read.',

  // The Queue section: the user's waiting GPU work.
  'queue.heading': 'Queue',
  'queue.loading': 'Loading the queue…',
  'queue.empty': 'Nothing queued.',
  'queue.listLabel': 'Your pending GPU work',
  'queue.teamsLabel': 'GPU work per team',
  'queue.teamCounts': '{admitted} admitted · {pending} pending',
  'queue.server': 'Server {name}',
  'queue.job': 'Job {name}',
  'queue.work': 'GPU work {name}',
  'queue.meta': '{what} · {team} · ',
  'queue.ownTeam': 'your team',
  'queue.teamUnnamed': 'Your team',
  'queue.teamUnnamedNumbered': 'Your team {n}',
  'queue.waited': 'waiting {waited}',
  'queue.waitedUnknown': 'unknown',
  'queue.noGpu': 'no GPU',
  'queue.amount': '{amount}× {resource}',
  'queue.resourceGpu': 'GPU',
  'queue.resourceShared': 'shared GPU',
  'queue.resourceMig': 'MIG {profile}',
  'queue.position': "#{position} in the team's queue",
  'queue.positionShared': "#{position} in the team's queue · #{shared} in the cluster queue",
  'queue.notPlaced': 'not placed in the queue yet',
  'queue.positionLoading': 'position loading…',

  // The commands: the palette, the file browser's menu and the notebook's toolbar.
  'command.openPanel': 'Show GPU Panel',
  'command.openPanelCaption': 'Show the GPU memory of notebooks and the GPUs of this server',
  'command.category': 'GPU',
  'command.runAsJob': 'Run as GPU job…',
  'command.runAsJobCaption': "Run this notebook as a training job in your team's GPU queue",
  'command.jobButton': 'GPU job',

  // The Queue section, when the hub's gpuaas service gives no queue (the details: the log).
  'queue.forbidden':
    'The queue cannot be shown: this server may not ask for it. An administrator can see why ' +
    "in the browser's console and the server's log.",
  'queue.unavailable': 'The queue cannot be reached right now. Retrying.',
  'queue.serviceError':
    'The queue service had a problem. Retrying; an administrator can see why in its log.',

  // GPU jobs: the "Run as GPU job" dialog.
  'jobs.dialogTitle': 'Run as GPU job',
  'jobs.submit': 'Submit',
  'jobs.notebook': 'Notebook: {path}',
  'jobs.team': 'Team',
  'jobs.gpu': 'GPU',
  'jobs.count': 'Count',
  'jobs.timeLimit': 'Time limit',
  'jobs.parameters': 'Parameters (name = value, one a line)',
  'jobs.notNameValue': '"{line}" is not name = value',
  'jobs.parametersCell': 'Your values replace the defaults of the parameters cell (cell {cell}).',
  'jobs.noParametersCell':
    'This notebook has no cell tagged "parameters": your values are set in a new first ' +
    'cell, and a later cell that sets the same name overrides them.',
  'jobs.errorTitle': 'GPU job',
  'jobs.optionsFailed': 'The GPU job options could not be loaded: {problem}',
  'jobs.noTeam': 'None of your teams runs notebooks as GPU jobs.',
  'jobs.notSubmitted': 'GPU job not submitted',
  'jobs.submitted': "GPU job {name} submitted: follow it in the GPU panel's Queue.",

  // GPU jobs: the section under the Queue, its notices and actions.
  'jobs.heading': 'GPU jobs',
  'jobs.listLabel': 'Your GPU jobs',
  'jobs.none': 'No GPU jobs. Run a notebook with "Run as GPU job…".',
  'jobs.loadFailed': 'Could not load your GPU jobs: {problem}. Retrying.',
  'jobs.finished': 'GPU job {name} ({notebook}) {state}',
  'jobs.meta': '{name} · {offering}',
  'jobs.openOutput': 'Open output',
  'jobs.log': 'Log',
  'jobs.logTitle': 'Log of {name}',
  'jobs.logEmpty': '(nothing logged yet)',
  'jobs.logFailed': 'GPU job log',
  'jobs.close': 'Close',
  'jobs.remove': 'Remove',
  'jobs.removeTitle': 'Remove GPU job {name}?',
  'jobs.removeBody': 'Its log and result are removed (the executed copy in your files stays).',
  'jobs.notRemoved': 'GPU job not removed',
  'jobs.cancel': 'Cancel',
  'jobs.cancelTitle': 'Cancel GPU job {name}?',
  'jobs.cancelBody': 'It stops now and leaves the queue.',
  'jobs.notCancelled': 'GPU job not cancelled',

  // A job's state, as its row and its notice say it.
  'job.queued': 'queued',
  'job.queuedAt': 'queued · #{position} in the queue',
  'job.starting': 'starting',
  'job.running': 'running ({offering})',
  'job.runningOn': 'running on {flavors} ({offering})',
  'job.succeeded': 'succeeded',
  'job.failed': 'failed',
  'job.failedWhy': 'failed: {message}',
  'job.stopped': 'stopped',
  'job.stoppedWhy': 'stopped: {message}',

  // The way up to a bigger GPU, and a kernel at its GPU memory cap.
  'resize.action': 'Move to a bigger GPU: {next}',
  'resize.title': 'Move to a bigger GPU',
  'resize.confirm': 'Save and move',
  'resize.sized': '{title} ({memory})',
  'resize.text':
    'Every open notebook and file is saved, then this server stops and starts again on ' +
    '{next} instead of {current}, with the same home folder. Running kernels stop; where ' +
    'this server keeps kernel state, each idle kernel saves its variables first and they come ' +
    'back when you open its notebook again (a notice names any that could not be saved: ' +
    're-run what made those).{wait} JupyterLab opens again when the server is up.',
  'resize.wait': ' It may have to wait for a GPU ({why}); the page shows its place in the queue.',
  'resize.downOffer': 'This session uses {peak} of its {current}: move to {next}?',
  'resize.downAction': 'Move to a smaller GPU: {next}',
  'resize.downTitle': 'Move to a smaller GPU',
  'resize.downWhy':
    'Its GPU memory peak so far is {peak}; {next} holds that with room to spare, and frees ' +
    'the rest for others. ',
  'resize.saving': 'Saving your documents…',
  'resize.notMoved': 'Not moved',
  'resize.notSaved': 'Not every document could be saved ({problem}); nothing was stopped.',
  'resize.refused': 'The move did not go through, and nothing was stopped. Try again later.',
  'resize.stopping': 'Moving to {next}: this server is stopping…',
  'resize.follow': "Moving to {next}: follow it on the hub's home page.",
  'cap.reached':
    '{who} is at its {cap} GPU memory cap: its next GPU allocation fails with ' +
    '"out of memory".{then}',
  'cap.wayUp': ' To go on with more, use "{action}" in the GPU panel.',
  'cap.noWayUp':
    ' Use less GPU memory (smaller batches, free tensors), or start a bigger GPU from the hub.',
  'cap.aKernel': 'A kernel',

  // A notebook's variables, saved and restored (docs/kernel-state.md).
  'state.restored': '{notebook}: its variables are back ({names}), in {duration}.',
  'state.restoredExcept':
    '{notebook}: its variables are back ({names}), in {duration}, except {lost}.',
  'state.nothingBack': '{notebook}: no saved variable came back: {lost}.',
  'state.refused':
    '{notebook}: the saved variables were not loaded, and this kernel is as it was: {message}',
  'state.notRestored': '{notebook}: the saved variables could not be restored ({problem}).',
  'state.ask': '{notebook} has variables saved {ago} ({names}). Restore them into this kernel?',
  'state.askRestore': 'Restore',
  'state.askSkip': 'Not now',
  'state.details': 'Details',
  'state.detailsTitle': 'Variables of {notebook}',
  'state.back': 'Back: {names}',
  'state.notBackOne': 'Not back: {name} ({reason})',
  'state.saved': 'Variables of {notebook} saved ({size}, in {duration}).',
  'state.savedExcept': 'Variables of {notebook} saved ({size}, in {duration}), except {lost}.',
  'state.busy': '{notebook}: not saved, a cell is running. Try again when it is done.',
  'state.notSaved': 'Variables of {notebook} not saved: {problem}',
  'state.wouldKeep': 'A reclaim would keep {size} of variables (about {duration} to save).',
  'state.wouldKeepFits':
    'A reclaim would keep {size} of variables (about {duration} to save, within the {limit} ' +
    'it waits for them).',
  'state.wouldKeepTooLong':
    'A reclaim would keep {size} of variables, but saving them takes about {duration}, longer ' +
    'than the {limit} it waits for them: the largest would be lost. Free or save what you can.',
  'state.wouldKeepNothing': 'A reclaim would keep none of your variables.',
  'state.wouldLose': 'Never kept: {lost}.',
  'state.thisKernel': 'this kernel',
  'state.noNotebook': 'Open a notebook with a running kernel first.',
  'command.saveVariables': 'Save variables now',
  'command.saveVariablesCaption':
    "Save the current notebook's variables to your home, to come back when it opens again",
  'command.restoreVariables': 'Restore saved variables',
  'command.restoreVariablesCaption':
    "Load the current notebook's saved variables into its kernel (names it already has stay)"
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

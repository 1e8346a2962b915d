// One prompt's turn as the caller sees it: an async iterable of the turn's
// events, and `result`, the prompt's answer `{status, reason}`. The daemon
// writes every event of a turn before the prompt's answer (§4.5), so the
// iteration ends once the answer is in, with nothing left behind.

export class Turn {
  /**
   * @param {string} sessionId
   * @param {number|null} afterSeq  the session's last seq seen before the prompt: older events are not this turn's
   */
  constructor(sessionId, afterSeq) {
    this.sessionId = sessionId;
    this.afterSeq = afterSeq;
    /** True once the turn's `turn/start` was seen: it runs in the daemon and can be followed again. */
    this.started = false;
    /** The `reason` of the turn's `turn/end`, once seen. */
    this.endReason = null;
    this.done = false;
    this.queue = [];
    this.waiters = [];
    this.failure = null;
    this.result = new Promise((resolve, reject) => {
      this.resolveResult = resolve;
      this.rejectResult = reject;
    });
    // A caller that only iterates must not see an unhandled rejection;
    // awaiting `result` still throws.
    this.result.catch(() => {});
  }

  /** An event of the turn's session. */
  push(event) {
    if (this.done) return;
    if (event.type === 'turn/start') this.started = true;
    if (event.type === 'turn/end') this.endReason = event.data?.reason ?? null;
    const waiter = this.waiters.shift();
    if (waiter) waiter.resolve({ value: event, done: false });
    else if (!this.discarding) this.queue.push(event);
  }

  /**
   * For a caller that takes events from the client's 'event' listener and
   * only awaits `result`: the turn keeps no events for an iteration.
   */
  discardEvents() {
    this.discarding = true;
    this.queue.length = 0;
  }

  /** The prompt's answer: the iteration ends after the queued events. */
  finish(result) {
    if (this.done) return;
    this.done = true;
    this.resolveResult(result);
    for (const w of this.waiters.splice(0)) w.resolve({ value: undefined, done: true });
  }

  /** The prompt failed: the iteration throws `err` after the queued events. */
  fail(err) {
    if (this.done) return;
    this.done = true;
    this.failure = err;
    this.rejectResult(err);
    for (const w of this.waiters.splice(0)) w.reject(err);
  }

  [Symbol.asyncIterator]() {
    return {
      next: () => {
        if (this.queue.length) return Promise.resolve({ value: this.queue.shift(), done: false });
        if (this.failure) return Promise.reject(this.failure);
        if (this.done) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
      },
      return: () => {
        // The caller stopped reading: later events are dropped, the result still comes.
        this.discardEvents();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}

// Polling that stops when the page is left, and never overlaps itself.

export function every(intervalMs: number, task: () => Promise<void>): () => void {
  let stopped = false;
  let timer: number | undefined;
  const tick = async () => {
    try {
      await task();
    } catch (error) {
      console.warn("refresh failed", error);
    }
    if (!stopped) timer = window.setTimeout(tick, intervalMs);
  };
  void tick();
  return () => {
    stopped = true;
    window.clearTimeout(timer);
  };
}

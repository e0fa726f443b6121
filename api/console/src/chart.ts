// Rows per second over time, from a job's committed epochs (Chart.js).

import { CategoryScale, Chart, Legend, LinearScale, LineController, LineElement, PointElement,
  Tooltip } from "chart.js";

import type { Checkpoint } from "./api";

Chart.register(LineController, LineElement, PointElement, LinearScale, CategoryScale, Legend, Tooltip);

/** At most this many epochs are drawn: the latest ones. */
const MAX_POINTS = 120;

export interface RateSample { label: string; rowsInPerS: number; rowsOutPerS: number }

/** Rows/s of each epoch: its rows over the time since the previous epoch committed. */
export function ratesOf(checkpoints: Checkpoint[]): RateSample[] {
  const samples: RateSample[] = [];
  for (let i = 1; i < checkpoints.length; i++) {
    const seconds = (Date.parse(checkpoints[i].committed_at) - Date.parse(checkpoints[i - 1].committed_at)) / 1000;
    if (seconds <= 0) continue;
    samples.push({ label: new Date(checkpoints[i].committed_at).toLocaleTimeString(),
      rowsInPerS: checkpoints[i].rows_in / seconds, rowsOutPerS: checkpoints[i].rows_out / seconds });
  }
  return samples.slice(-MAX_POINTS);
}

export interface RatesChart { draw: (samples: RateSample[]) => void; destroy: () => void }

export function ratesChart(canvas: HTMLCanvasElement): RatesChart {
  const chart = new Chart<"line", number[], string>(canvas, {
    type: "line",
    data: { labels: [], datasets: [
      { label: "Input rows/s", data: [], borderColor: "#0e7490", backgroundColor: "#0e7490", tension: 0.2 },
      { label: "Output rows/s", data: [], borderColor: "#c2410c", backgroundColor: "#c2410c", tension: 0.2 },
    ] },
    options: { animation: false, responsive: true, maintainAspectRatio: false,
      scales: { y: { beginAtZero: true, title: { display: true, text: "rows/s" } } } },
  });
  const draw = (samples: RateSample[]) => {
    chart.data.labels = samples.map((s) => s.label);
    chart.data.datasets[0].data = samples.map((s) => s.rowsInPerS);
    chart.data.datasets[1].data = samples.map((s) => s.rowsOutPerS);
    chart.update();
  };
  return { draw, destroy: () => chart.destroy() };
}

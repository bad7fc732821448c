// Distinct colours for the owners of one queue's partitions: a fixed palette in the order of the
// owners' names, so two dispatchers never get two shades of one hue.
const PALETTE = ['#60a5fa', '#f59e0b', '#34d399', '#f472b6', '#a78bfa', '#f87171', '#2dd4bf', '#facc15', '#818cf8', '#fb923c'];

/** The colour of an unowned partition. */
export const UNOWNED = '#e5e7eb';

/** Each owner's colour (the palette in name order, repeating past ten owners); unowned is grey. */
export function ownerColours(owners: Iterable<string>): Map<string, string> {
  const names = [...new Set(owners)].filter((o) => o !== '').sort();
  return new Map(names.map((o, i) => [o, PALETTE[i % PALETTE.length] ?? UNOWNED]));
}

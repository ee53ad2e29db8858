// Kernels that break the browser host on purpose (ctest webgpu_hostile_*): attest must give a clear
// verdict within its timeout and leave no browser process behind.
const declaration = (name) => ({ name, features: ["causal"] });

/** Never returns: the page's thread spins, so page.evaluate never answers (attest's hang). */
export const hang = { declaration: declaration("hostile-hang"), forward: () => { for (;;); } };

/** Navigates the page away mid-call: the host reports a crash. */
export const navigateAway = {
  declaration: declaration("hostile-navigate"),
  forward: () => { window.location.href = "/host/page.html?gone"; return new Promise(() => {}); },
};

/** Destroys its GPUDevice mid-call, as a GPU process crash loses it: the host reports a crash. */
export const deviceLost = {
  declaration: declaration("hostile-lost"),
  forward: async (problem, device) => {
    device.destroy();
    await device.lost;
    throw new Error("device lost");
  },
};

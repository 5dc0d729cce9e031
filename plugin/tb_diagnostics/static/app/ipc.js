// TensorBoard's plugin IPC (tensorboard/components/experimental/plugin_lib),
// just enough to hear the reload button: the host sends
// "experimental.DataReloaded" on the port we hand it at bootstrap.

export function listenForReload(onReload) {
  if (window.parent === window) return;
  const channel = new MessageChannel();
  channel.port1.onmessage = (ev) => {
    let msg;
    try {
      msg = JSON.parse(ev.data);
    } catch {
      return;
    }
    if (msg && msg.type === "experimental.DataReloaded") onReload();
    if (msg && !msg.isReply && msg.id !== undefined) {
      // Every host message expects a reply; answer so the host does not wait.
      channel.port1.postMessage(JSON.stringify({ type: msg.type, id: msg.id, payload: null, error: null, isReply: true }));
    }
  };
  window.parent.postMessage("experimental.bootstrap", "*", [channel.port2]);
}

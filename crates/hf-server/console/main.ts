// The console's entry script: mounts the shell (`app`) into the page.
import { mount } from "hfx";
import App from "./c-console-app.js";

const target = document.getElementById("app");
if (target) {
  target.textContent = "";
  mount(App, target, {});
}
